"""The benchmark's floor (issue: bench): the least a turn endpoint can do on this stack. It
stores the posted messages in one transaction (the session row locked, one insert) and
returns them, with no token accounting, recall, notes or assembly. `ebbtide bench` compares
every turn against it; it is served only with `EBBTIDE_FLOOR_ENDPOINT=true`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.core.types import Message, WindowMessage
from app.services.context import ServiceContext
from app.services.sessions import locked_session
from app.store import sessions as session_store


async def store_and_echo(
    ctx: ServiceContext, tenant_id: str, session_id: str, messages: Sequence[Message]
) -> dict[str, Any]:
    now = ctx.clock()
    async with ctx.database.transaction() as db:
        await session_store.create_session(db, session_id, tenant_id)
        row = await locked_session(db, tenant_id, session_id)
        rows = [
            WindowMessage(
                seq=row.next_seq + i, turn=row.turn_count + 1, message=m, tokens=0, created_at=now
            )
            for i, m in enumerate(messages)
        ]
        await session_store.insert_messages(db, session_id, rows)
        row.next_seq += len(rows)
        row.turn_count += 1
    return {"session_id": session_id, "messages": [m.to_openai() for m in messages]}
