"""HTTP routes (DESIGN §6)."""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.api.deps import service_context, tenant_with
from app.api.errors import ERROR_RESPONSES, error_response
from app.api.schemas import (
    SESSION_ID_PATTERN,
    ChunkView,
    RecallRequest,
    RecallResponse,
    StatusView,
    TurnRequest,
    TurnResponse,
)
from app.errors import MessageTooLarge, OverLimit, TooManyMessages
from app.services.context import ServiceContext
from app.services.recall import recall_query
from app.services.sessions import read_chunk, session_status
from app.services.turn_plan import TurnInput
from app.services.turns import run_turn

router = APIRouter()

SessionId = Annotated[str, Path(pattern=SESSION_ID_PATTERN, description="Client-chosen id.")]
Context = Annotated[ServiceContext, Depends(service_context)]
Reader = Annotated[str, Depends(tenant_with("memory:read"))]
Writer = Annotated[str, Depends(tenant_with("memory:write"))]


def _check_limits(body: TurnRequest, ctx: ServiceContext) -> None:
    limits = ctx.settings.limits
    if len(body.messages) > limits.max_messages_per_turn:
        raise TooManyMessages(
            f"a turn carries at most {limits.max_messages_per_turn} messages",
            field="messages",
            limit=limits.max_messages_per_turn,
            got=len(body.messages),
        )
    for index, message in enumerate(body.messages):
        if message.content and len(message.content) > limits.max_message_chars:
            raise MessageTooLarge(
                f"messages[{index}].content is longer than {limits.max_message_chars} characters",
                field=f"messages[{index}].content",
                limit=limits.max_message_chars,
            )


def _check_recall_limits(body: RecallRequest, ctx: ServiceContext) -> None:
    limits = ctx.settings.limits
    for field, value, limit in (
        ("top_k", body.top_k, limits.max_top_k),
        ("budget_tokens", body.budget_tokens, limits.max_recall_budget_tokens),
    ):
        if value is not None and value > limit:
            raise OverLimit(f"{field} is at most {limit}", field=field, limit=limit, got=value)


def _request_hash(body: TurnRequest) -> str:
    canonical = json.dumps(body.model_dump(mode="json", exclude_none=True), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


@router.post(
    "/sessions/{session_id}/turn",
    response_model=TurnResponse,
    responses=ERROR_RESPONSES,
    tags=["turns"],
)
async def post_turn(
    session_id: SessionId,
    body: TurnRequest,
    ctx: Context,
    tenant: Writer,
    idempotency_key: Annotated[str | None, Header(max_length=256)] = None,
) -> dict[str, Any]:
    """Store this turn's messages and answer with the prompt to send to the model."""
    _check_limits(body, ctx)
    turn = TurnInput(
        session_id=session_id,
        tenant_id=tenant,
        messages=body.messages,
        system=body.system,
        tools=body.tools,
        model=body.model,
        context_window=body.context_window,
        reserve_tokens=body.reserve_tokens,
        policy=body.policy.model_dump(exclude_none=True) if body.policy else None,
        recall=body.recall,
        observed_prompt_tokens=body.observed_prompt_tokens,
        idempotency_key=idempotency_key,
        request_hash=_request_hash(body),
    )
    return await run_turn(ctx, turn)


@router.post(
    "/sessions/{session_id}/recall",
    response_model=RecallResponse,
    responses=ERROR_RESPONSES,
    tags=["sessions"],
)
async def post_recall(
    session_id: SessionId, body: RecallRequest, ctx: Context, tenant: Reader
) -> dict[str, Any]:
    """Search the session's offloaded chunks: raw text headed `[ts | turn a-b | chunk_id]`,
    capped per item and in total, or an explicit no match."""
    _check_recall_limits(body, ctx)
    return await recall_query(
        ctx, tenant, session_id, body.query, body.top_k, budget_tokens=body.budget_tokens
    )


@router.get(
    "/sessions/{session_id}/status",
    response_model=StatusView,
    responses=ERROR_RESPONSES,
    tags=["sessions"],
)
async def get_status(session_id: SessionId, ctx: Context, tenant: Reader) -> dict[str, Any]:
    """Watermark, level, counts, notes and the last offload of a session."""
    return await session_status(ctx, tenant, session_id)


@router.get(
    "/sessions/{session_id}/chunks/{chunk_id}",
    response_model=ChunkView,
    responses=ERROR_RESPONSES,
    tags=["sessions"],
)
async def get_chunk(
    session_id: SessionId,
    chunk_id: Annotated[str, Path(max_length=40)],
    ctx: Context,
    tenant: Reader,
) -> dict[str, Any]:
    """One offloaded chunk, raw, by id (oversize stubs point here)."""
    return await read_chunk(ctx, tenant, session_id, chunk_id)


@router.get("/healthz", tags=["ops"])
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", tags=["ops"], responses={503: ERROR_RESPONSES[503]})
async def readyz(ctx: Context) -> Any:
    """The database answers."""
    if await ctx.database.ping():
        return {"status": "ready"}
    return error_response(503, "database_unavailable", "the database does not answer")


@router.get("/metrics", tags=["ops"], response_class=Response)
async def metrics() -> Response:
    """Prometheus metrics."""
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
