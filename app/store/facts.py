"""Key facts and the notes row (C2). Repositories flush; the turn's transaction commits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Table, select, union_all, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.facts import CarriedFrom, Fact, FactKind, FactStatus
from app.store.models import FactRow, NoteRow
from app.store.sessions import execute_in_batches


def _fact(row: FactRow) -> Fact:
    return Fact(
        kind=FactKind(row.kind),
        text=row.text,
        source_turn=row.source_turn,
        source_seq=row.source_seq,
        role=row.role,
        ordinal=row.ordinal,
        status=FactStatus(row.status),
        id=row.id,
        subject=row.subject,
        value=row.value,
        carried=(
            CarriedFrom(row.carried_from, row.carried_fact_id)
            if row.carried_from is not None and row.carried_fact_id is not None
            else None
        ),
    )


async def current_facts(db: AsyncSession, session_id: str, recent_resolved: int) -> list[Fact]:
    """Active facts, and the `recent_resolved` most recently resolved pending actions (for
    `done`), in one round trip: every turn reads them."""
    active = select(FactRow).where(
        FactRow.session_id == session_id, FactRow.status == FactStatus.ACTIVE
    )
    resolved = (
        select(FactRow)
        .where(FactRow.session_id == session_id, FactRow.status == FactStatus.RESOLVED)
        .order_by(FactRow.resolved_at_turn.desc(), FactRow.id.desc())
        .limit(recent_resolved)
    )
    rows = list(
        (await db.execute(select(FactRow).from_statement(union_all(active, resolved)))).scalars()
    )
    kept = sorted((r for r in rows if r.status == FactStatus.ACTIVE), key=lambda r: r.id)
    done = sorted(
        (r for r in rows if r.status == FactStatus.RESOLVED),
        key=lambda r: (r.resolved_at_turn or 0, r.id),
    )
    return [_fact(r) for r in kept] + [_fact(r) for r in done]


FACTS = cast(Table, FactRow.__table__)


async def insert_facts(
    db: AsyncSession, session_id: str, facts: Sequence[Fact], turn: int
) -> list[int]:
    """Writes the facts (a whole history's can be thousands: a batch at a time); their ids,
    in order."""

    def row_of(fact: Fact) -> Mapping[str, object]:
        return {
            "session_id": session_id,
            "kind": fact.kind,
            "text": fact.text,
            "source_turn": fact.source_turn,
            "source_seq": fact.source_seq,
            "role": fact.role,
            "ordinal": fact.ordinal,
            "status": fact.status,
            "confirmed_at_turn": turn,
            "subject": fact.subject,
            "value": fact.value,
            "carried_from": fact.carried.session_id if fact.carried else None,
            "carried_fact_id": fact.carried.fact_id if fact.carried else None,
        }

    statement = insert(FACTS).returning(FACTS.c.id, sort_by_parameter_order=True)
    return [row.id for row in await execute_in_batches(db, statement, facts, row_of)]


async def active_facts_by_id(
    db: AsyncSession, session_id: str, fact_ids: Sequence[int]
) -> list[Fact]:
    """The session's active facts among `fact_ids` (a forgotten, superseded or unknown id is
    simply not there), in id order."""
    rows = await db.execute(
        select(FactRow)
        .where(
            FactRow.session_id == session_id,
            FactRow.id.in_(list(fact_ids)),
            FactRow.status == FactStatus.ACTIVE,
        )
        .order_by(FactRow.id)
    )
    return [_fact(row) for row in rows.scalars()]


async def carried_fact_ids(db: AsyncSession, session_id: str, source: str) -> set[int]:
    """The ids (in `source`) of the facts this session already carries from it."""
    rows = await db.execute(
        select(FactRow.carried_fact_id).where(
            FactRow.session_id == session_id, FactRow.carried_from == source
        )
    )
    return {int(fact_id) for fact_id in rows.scalars() if fact_id is not None}


async def supersede(db: AsyncSession, session_id: str, fact_id: int, by: int | None) -> None:
    await db.execute(
        update(FactRow)
        .where(FactRow.session_id == session_id, FactRow.id == fact_id)
        .values(status=FactStatus.SUPERSEDED, superseded_by=by)
    )


async def expire(db: AsyncSession, session_id: str, fact_ids: Sequence[int]) -> None:
    """Retires facts the per-kind bound aged out (one statement for all of them)."""
    if fact_ids:
        await db.execute(
            update(FactRow)
            .where(FactRow.session_id == session_id, FactRow.id.in_(list(fact_ids)))
            .values(status=FactStatus.EXPIRED)
        )


async def resolve(db: AsyncSession, session_id: str, fact_id: int, turn: int) -> None:
    await db.execute(
        update(FactRow)
        .where(FactRow.session_id == session_id, FactRow.id == fact_id)
        .values(status=FactStatus.RESOLVED, resolved_at_turn=turn)
    )


async def save_notes(
    db: AsyncSession,
    session_id: str,
    *,
    body: dict[str, Any],
    rendered: str | None,
    tokens: int | None,
    needs_rebuild: bool,
) -> None:
    """Upserts the notes row; `rendered` None keeps the text the prompt carries now."""
    values: dict[str, Any] = {"body": body, "needs_rebuild": needs_rebuild}
    if rendered is not None:
        values.update(rendered=rendered, tokens=tokens or 0)
    statement = insert(NoteRow).values(
        session_id=session_id,
        rendered=values.get("rendered", ""),
        tokens=values.get("tokens", 0),
        body=body,
        needs_rebuild=needs_rebuild,
    )
    await db.execute(
        statement.on_conflict_do_update(index_elements=[NoteRow.session_id], set_=values)
    )


async def mark_notes_stale(db: AsyncSession, session_id: str) -> None:
    """The next turn renders the notes again (a fact arrived outside a turn)."""
    await db.execute(
        update(NoteRow).where(NoteRow.session_id == session_id).values(needs_rebuild=True)
    )
