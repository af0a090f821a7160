"""Carrying confirmed facts into a session (docs/DESIGN.md §6, `carry_facts`): a new session
may start from a few active facts of another session of the same tenant, never from its
history. Each copy keeps the session it came from, that session's fact id and its source turn.
"""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import FactsNotCarried
from app.core.facts import CarriedFrom, CarryFacts, Fact, FactStatus
from app.core.results import FactsCarried
from app.core.types import session_key
from app.services.context import ServiceContext
from app.services.sessions import locked_session
from app.store import events as event_store
from app.store import facts as fact_store
from app.store import sessions as session_store


async def facts_to_carry(
    db: AsyncSession, tenant_id: str, session_id: str, carry: CarryFacts
) -> list[Fact]:
    """The facts `carry` names, as new facts of `session_id` (those it carries already left
    out). Another tenant's session is no session of this one: its ids are not found."""
    if carry.from_session == session_id:
        raise FactsNotCarried("a session cannot carry its own facts", session=session_id)
    source = session_key(tenant_id, carry.from_session)
    found = await fact_store.active_facts_by_id(db, source, carry.fact_ids)
    missing = sorted(set(carry.fact_ids) - {f.id for f in found if f.id is not None})
    if missing:
        raise FactsNotCarried(
            f"not active facts of session {carry.from_session!r} (forgotten, superseded or "
            "never there): nothing was carried",
            session=carry.from_session,
            fact_ids=missing,
        )
    target = session_key(tenant_id, session_id)
    carried = await fact_store.carried_fact_ids(db, target, carry.from_session)
    return [
        replace(
            fact,
            id=None,
            source_seq=None,
            status=FactStatus.ACTIVE,
            carried=CarriedFrom(carry.from_session, fact.id),
        )
        for fact in found
        if fact.id is not None and fact.id not in carried
    ]


async def carry_into(
    ctx: ServiceContext, tenant_id: str, session_id: str, carry: CarryFacts
) -> FactsCarried:
    """The memory tool's `carry`: the facts `carry` names join an existing session's facts in
    one transaction, and its next turn renders the notes with them. A fact carried before is
    not carried twice; a fact that is not active in the source refuses the whole call."""
    async with ctx.database.transaction() as db:
        row = await locked_session(db, tenant_id, session_id)
        facts = await facts_to_carry(db, tenant_id, session_id, carry)
        if facts:
            await fact_store.insert_facts(db, row.id, facts, row.turn_count)
            await fact_store.mark_notes_stale(db, row.id)
            session_store.bump_version(row)  # a turn in flight re-reads the facts
        carried = tuple(f.carried.fact_id for f in facts if f.carried is not None)
        await event_store.record_event(
            db,
            row.id,
            row.turn_count,
            "carry",
            {"from": carry.from_session, "fact_ids": list(carried)},
        )
    return FactsCarried(
        from_session=carry.from_session,
        carried=carried,
        texts=tuple(f.text for f in facts),
        already_carried=tuple(i for i in carry.fact_ids if i not in carried),
    )
