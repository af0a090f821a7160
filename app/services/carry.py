"""Carrying confirmed facts into a session (docs/DESIGN.md §6, `carry_facts`): a new session
may start from a few active facts of another session of the same tenant, never from its
history. Each copy keeps the session it came from, that session's fact id and its source turn.
"""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import FactsNotCarried
from app.core.facts import CarriedFrom, CarryFacts, Fact, FactStatus
from app.core.types import session_key
from app.store import facts as fact_store


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
