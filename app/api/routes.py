"""HTTP routes (docs/DESIGN.md §6): parse, call one use case, render its result."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.api.deps import principal, service_context, tenant_with
from app.api.errors import ERROR_RESPONSES, error_response
from app.api.schemas import (
    BLOB_HASH_PATTERN,
    CHUNK_ID_PATTERN,
    EVENT_KIND_PATTERN,
    SESSION_ID_PATTERN,
    ChunkView,
    EngineView,
    EventsPage,
    MemoryCall,
    MemoryResponse,
    Readiness,
    RecallRequest,
    RecallResponse,
    RememberRequest,
    RememberResponse,
    StatusView,
    ToolDefinitions,
    TurnRequest,
    TurnRequestBody,
    TurnResponse,
)
from app.core.assemble import PromptFormat
from app.core.blobs import first_media_problem, served_as
from app.core.errors import MessageTooLarge, TooManyMessages, UnsupportedMedia
from app.core.messages import Format, Message
from app.core.plan import TurnInput
from app.core.scopes import Scope
from app.services.auth import Principal
from app.services.context import ServiceContext
from app.services.memory import remember
from app.services.memory_tool import call_memory, definitions
from app.services.recall import recall_query
from app.services.sessions import list_events, read_blob, read_chunk, session_status
from app.services.throttle import CallKind
from app.services.turns import run_turn

router = APIRouter()

SessionId = Annotated[str, Path(pattern=SESSION_ID_PATTERN, description="Client-chosen id.")]
Context = Annotated[ServiceContext, Depends(service_context)]
Reader = Annotated[str, Depends(tenant_with(Scope.READ))]
Writer = Annotated[str, Depends(tenant_with(Scope.WRITE))]
Caller = Annotated[Principal, Depends(principal)]


def check_limits(messages: Sequence[Message], ctx: ServiceContext, *, whole: bool) -> None:
    """A turn's new messages, or a whole history (`whole`), within the message limits."""
    limits = ctx.settings.limits
    most = ctx.settings.proxy.max_history_messages if whole else limits.max_messages_per_turn
    if len(messages) > most:
        what = "a whole history holds" if whole else "a turn carries"
        raise TooManyMessages(
            f"{what} at most {most} messages", field="messages", limit=most, got=len(messages)
        )
    for index, message in enumerate(messages):
        if len(message.text) > limits.max_message_chars:
            raise MessageTooLarge(
                f"messages[{index}] says more than {limits.max_message_chars} characters",
                field=f"messages[{index}]",
                limit=limits.max_message_chars,
            )
    refused = first_media_problem(messages)
    if refused is not None:
        index, problem = refused
        raise UnsupportedMedia(
            f"messages[{index}] holds an image, clip or file that cannot be accepted: {problem}",
            field=f"messages[{index}]",
        )


def _request_hash(body: TurnRequestBody) -> str:
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
    request: Request,
    ctx: Context,
    tenant: Writer,
    idempotency_key: Annotated[str | None, Header(max_length=256)] = None,
) -> TurnResponse:
    """Store this turn's messages and answer with the prompt to send to the model. The
    messages come in `format` (`openai`, `anthropic` or `responses`); the prompt is rendered
    in `prompt_format` (default: the same)."""
    size = len(await request.body())  # read already, to parse the body
    ctx.throttle.admit(tenant, CallKind.TURN, size)
    async with ctx.throttle.sized(tenant, size):
        return await _turn(session_id, body, ctx, tenant, idempotency_key)


async def _turn(
    session_id: str,
    body: TurnRequestBody,
    ctx: ServiceContext,
    tenant: str,
    idempotency_key: str | None,
) -> TurnResponse:
    system, messages = await ctx.throttle.run(body.read)
    await ctx.throttle.run(check_limits, messages, ctx, whole=body.whole_history)
    turn = TurnInput(
        session_id=session_id,
        tenant_id=tenant,
        messages=messages,
        system=system,
        tools=body.tools,
        model=body.model,
        context_window=body.context_window,
        reserve_tokens=body.reserve_tokens,
        policy=body.policy.model_dump(exclude_none=True) if body.policy else None,
        recall=body.recall,
        observed_prompt_tokens=body.observed_prompt_tokens,
        observed_cached_tokens=body.observed_cached_tokens,
        prompt_format=body.prompt_format or PromptFormat.of_input(Format(body.format)),
        idempotency_key=idempotency_key,
        request_hash=await ctx.throttle.run(_request_hash, body),
        whole_history=body.whole_history,
        carry_facts=body.carry_facts.read() if body.carry_facts else None,
    )
    return TurnResponse.model_validate(await run_turn(ctx, turn))


@router.post(
    "/sessions/{session_id}/recall",
    response_model=RecallResponse,
    responses=ERROR_RESPONSES,
    tags=["sessions"],
)
async def post_recall(
    session_id: SessionId, body: RecallRequest, ctx: Context, tenant: Reader
) -> RecallResponse:
    """Search the session's offloaded chunks: raw text headed `[ts | turn a-b | chunk_id]`,
    capped per item and in total, or an explicit no match."""
    found = await recall_query(
        ctx,
        tenant,
        session_id,
        body.query,
        body.top_k,
        budget_tokens=body.budget_tokens,
        asked_at=body.asked_at,
    )
    return RecallResponse.model_validate(found)


@router.get(
    "/sessions/{session_id}/status",
    response_model=StatusView,
    responses=ERROR_RESPONSES,
    tags=["sessions"],
)
async def get_status(session_id: SessionId, ctx: Context, tenant: Reader) -> StatusView:
    """Watermark, level, counts, notes and the last offload of a session."""
    return StatusView.of(await session_status(ctx, tenant, session_id))


@router.get(
    "/sessions/{session_id}/events",
    response_model=EventsPage,
    responses=ERROR_RESPONSES,
    tags=["sessions"],
)
async def get_events(
    session_id: SessionId,
    ctx: Context,
    tenant: Reader,
    after: Annotated[int, Query(ge=0, le=2**62, description="Events with ids above this.")] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    kind: Annotated[str | None, Query(max_length=32, pattern=EVENT_KIND_PATTERN)] = None,
) -> EventsPage:
    """The session's event log, oldest first: one `turn` event per turn with what it decided
    and measured, so a wrong answer can be traced to not stored, not found, found but not in
    the top k, or in the window but answered wrong."""
    page = await list_events(ctx, tenant, session_id, after=after, limit=limit, kind=kind)
    return EventsPage.model_validate(page)


@router.get(
    "/sessions/{session_id}/chunks/{chunk_id}",
    response_model=ChunkView,
    responses=ERROR_RESPONSES,
    tags=["sessions"],
)
async def get_chunk(
    session_id: SessionId,
    chunk_id: Annotated[str, Path(max_length=40, pattern=CHUNK_ID_PATTERN)],
    ctx: Context,
    tenant: Reader,
) -> ChunkView:
    """One offloaded chunk, raw, by id (oversize stubs point here)."""
    return ChunkView.model_validate(await read_chunk(ctx, tenant, session_id, chunk_id))


@router.get(
    "/sessions/{session_id}/blobs/{blob_hash}",
    response_class=Response,
    responses={**ERROR_RESPONSES, 200: {"content": {"application/octet-stream": {}}}},
    tags=["sessions"],
)
async def get_blob(
    session_id: SessionId,
    blob_hash: Annotated[str, Path(pattern=BLOB_HASH_PATTERN)],
    ctx: Context,
    tenant: Reader,
) -> Response:
    """An offloaded image, clip or file, by the hash its chunk names, as its bytes."""
    found = await read_blob(ctx, tenant, session_id, blob_hash)
    served = served_as(found.media_type)
    headers = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox"}
    if not served.inline:
        headers["Content-Disposition"] = f'attachment; filename="{blob_hash[:16]}"'
    return Response(found.data, media_type=served.media_type, headers=headers)


@router.get("/healthz", tags=["ops"])
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get(
    "/readyz", tags=["ops"], response_model=Readiness, responses={503: ERROR_RESPONSES[503]}
)
async def readyz(ctx: Context) -> Any:
    """The database answers; which engine runs the search."""
    if await ctx.database.ping():
        engine = await ctx.database.store_engine()
        return Readiness(status="ready", engine=EngineView.model_validate(engine))
    return error_response(503, "database_unavailable", "the database does not answer")


@router.get("/metrics", tags=["ops"], response_class=Response)
async def metrics() -> Response:
    """Prometheus metrics."""
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


@router.post(
    "/sessions/{session_id}/memory",
    response_model=MemoryResponse,
    responses=ERROR_RESPONSES,
    tags=["memory"],
)
async def post_memory(
    session_id: SessionId, body: MemoryCall, ctx: Context, caller: Caller
) -> MemoryResponse:
    """The model-callable memory tool: `{"type": "help|recall|remember|status|offload|forget"}`.
    `offload` and `forget` need their own scopes; `forget` is two-step (request, confirm).
    Fields set to `null` are ignored, as strict function-calling modes send them."""
    return MemoryResponse.of(await call_memory(ctx, caller, session_id, body))


@router.post(
    "/sessions/{session_id}/remember",
    response_model=RememberResponse,
    responses=ERROR_RESPONSES,
    tags=["memory"],
)
async def post_remember(
    session_id: SessionId, body: RememberRequest, ctx: Context, tenant: Writer
) -> RememberResponse:
    """The memory tool's `remember`: one short point, length- and rate-limited, stored once."""
    return RememberResponse.model_validate(
        await remember(ctx, tenant, session_id, body.text, body.tags)
    )


@router.get(
    "/tools/memory", response_model=ToolDefinitions, responses=ERROR_RESPONSES, tags=["memory"]
)
async def get_memory_tool(caller: Caller) -> ToolDefinitions:
    """The tool definition, OpenAI and Anthropic forms, with only the types this key may call."""
    return ToolDefinitions.model_validate(definitions(caller))
