"""A whole history's rows go to the database a batch at a time (`ROWS_PER_STATEMENT`, so the
event loop serves others in between): every row of every batch is written, and the ids the
facts get come back in the facts' order."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select

from app.core.facts import Fact, FactKind
from app.core.messages import Message
from app.core.types import MessageState, WindowMessage
from app.store import facts as fact_store
from app.store import sessions as session_store
from app.store.database import Database
from app.store.models import MessageRow
from app.store.sessions import ROWS_PER_STATEMENT

KEY = "local/batched"
MANY = ROWS_PER_STATEMENT * 2 + 7  # three statements, the last one short


async def test_every_fact_of_every_batch_is_written_with_its_id_in_order(
    database: Database,
) -> None:
    facts = [Fact(FactKind.CONSTRAINT, f"only warehouse {i}", i, i) for i in range(MANY)]
    async with database.transaction() as db:
        await session_store.create_session(db, KEY, "local")
        ids = await fact_store.insert_facts(db, KEY, facts, turn=1)
        stored = await fact_store.active_facts_by_id(db, KEY, ids)
    assert len(set(ids)) == MANY
    assert [f.id for f in stored] == sorted(ids)
    by_id = {f.id: f.text for f in stored}
    assert [by_id[i] for i in ids] == [f.text for f in facts]


async def test_every_message_of_every_batch_is_written_then_offloaded(database: Database) -> None:
    now = datetime(2026, 3, 1, tzinfo=UTC)
    window = [
        WindowMessage(seq, seq // 2, Message.of("user", f"line {seq}"), 3, now)
        for seq in range(MANY)
    ]
    async with database.transaction() as db:
        await session_store.create_session(db, KEY, "local")
        await session_store.insert_messages(db, KEY, window)
        stored = await session_store.window_messages(db, KEY)
        assert [m.message.text for m in stored] == [f"line {seq}" for seq in range(MANY)]
        await session_store.mark_offloaded(db, KEY, {seq: f"ck_{seq // 3}" for seq in range(MANY)})
        rows = await db.execute(
            select(MessageRow.seq, MessageRow.state, MessageRow.chunk_id).where(
                MessageRow.session_id == KEY
            )
        )
        after = {seq: (state, chunk) for seq, state, chunk in rows}
    assert after == {seq: (MessageState.OFFLOADED, f"ck_{seq // 3}") for seq in range(MANY)}
