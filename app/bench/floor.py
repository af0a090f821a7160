"""The benchmark's floor: the least a turn endpoint can do on this stack, served at
`POST /bench/floor/{session_id}` only with `EBBTIDE_FLOOR_ENDPOINT=true` and outside the
public contract. Same framework, auth and database round trip as a turn: it stores the posted
messages in one transaction (the session row locked, one insert) and returns them, with no
token accounting, recall, notes or assembly. `ebbtide bench` compares every turn against it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Depends

from app import metrics
from app.api.deps import service_context, tenant_with
from app.api.routes import SessionId
from app.api.schemas import TurnRequest
from app.core.formats import openai
from app.core.messages import Message
from app.core.scopes import Scope
from app.core.types import WindowMessage, session_key
from app.services.context import ServiceContext
from app.services.sessions import locked_session
from app.store import sessions as session_store
from app.store import statements

router = APIRouter(include_in_schema=False)


async def store_and_echo(
    ctx: ServiceContext, tenant_id: str, session_id: str, messages: Sequence[Message]
) -> list[dict[str, Any]]:
    with statements.counting() as sent:
        echoed = await _store(ctx, tenant_id, session_id, messages)
    metrics.TURN_STATEMENTS.labels(kind="floor").observe(sent.round_trips)
    return echoed


async def _store(
    ctx: ServiceContext, tenant_id: str, session_id: str, messages: Sequence[Message]
) -> list[dict[str, Any]]:
    now = ctx.clock()
    async with ctx.database.transaction() as db:
        await session_store.create_session(db, session_key(tenant_id, session_id), tenant_id)
        row = await locked_session(db, tenant_id, session_id)
        rows = [
            WindowMessage(
                seq=row.next_seq + i, turn=row.turn_count + 1, message=m, tokens=0, created_at=now
            )
            for i, m in enumerate(messages)
        ]
        await session_store.insert_messages(db, row.id, rows)
        row.next_seq += len(rows)
        row.turn_count += 1
    return [openai.as_json(m) for m in messages]


@router.post("/bench/floor/{session_id}")
async def post_floor(
    session_id: SessionId,
    body: TurnRequest,
    ctx: Annotated[ServiceContext, Depends(service_context)],
    tenant: Annotated[str, Depends(tenant_with(Scope.WRITE))],
) -> dict[str, Any]:
    _, messages = body.read()
    echoed = await store_and_echo(ctx, tenant, session_id, messages)
    return {"session_id": session_id, "messages": echoed}
