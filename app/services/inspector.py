"""The session inspector's use cases (docs/OBSERVABILITY.md): the caller's sessions, one
session's budget timeline, notes, facts, archive and per-turn recall decisions, and where a
detail was at a turn. Read-only; the tenant rules are the API's (`owned_session`)."""

from __future__ import annotations

from app.core.errors import OverLimit, TurnNotFound
from app.core.inspection import (
    DetailTrace,
    Lines,
    SessionInspection,
    SessionSummary,
    TurnRecallDetail,
    notes_absence,
    recall_detail,
    timeline_point,
)
from app.core.recall_trace import locate
from app.core.results import SessionStatus
from app.services.context import ServiceContext
from app.services.policies import plan_policy
from app.services.sessions import owned_session, session_status
from app.store import events as event_store
from app.store import inspector as inspector_store
from app.store import sessions as session_store
from app.store.models import EventRow


async def list_sessions(ctx: ServiceContext, tenant_id: str, page: int) -> list[SessionSummary]:
    """A page (from 0) of the tenant's sessions, the most recently used first."""
    size = ctx.settings.inspector.sessions_per_page
    async with ctx.database.transaction() as db:
        return await inspector_store.tenant_sessions(db, tenant_id, size, page * size)


def _lines(ctx: ServiceContext, status: SessionStatus) -> Lines:
    """The lines to draw for turns whose event did not record them: the session's now, as
    its status reads them (the defaults while no window is known)."""
    view = status.window
    policy = view.policy if view else plan_policy(ctx.settings).policy
    return Lines(
        budget=view.budget if view else 0,
        watermark_base=view.watermark_base if view else 0,
        offload_ratio=policy.offload_ratio,
        emergency_ratio=policy.emergency_ratio,
    )


async def inspect_session(
    ctx: ServiceContext,
    tenant_id: str,
    session_id: str,
    *,
    turn: int | None = None,
    archive_page: int = 0,
) -> SessionInspection:
    """Everything the session page shows: the status the API answers, then the history in
    one more read. `turn`: the turn whose recall is detailed (None: the newest)."""
    status = await session_status(ctx, tenant_id, session_id)
    settings = ctx.settings.inspector
    async with ctx.database.transaction() as db:
        row = await owned_session(db, tenant_id, session_id)
        facts = await inspector_store.all_facts(db, row.id)
        spoken, messages = await inspector_store.spoken_messages(db, row.id)
        size = settings.chunks_per_page
        archive = await inspector_store.archive_page(db, row.id, size, archive_page * size)
        events = await inspector_store.turn_events(db, row.id, settings.timeline_turns + 1)
        asked = _event_of(events, turn)
        if turn is not None and asked is None:
            asked = await event_store.turn_event(db, row.id, turn)
    if turn is not None and asked is None:
        raise TurnNotFound("the session recorded no such turn", turn=turn)
    truncated = len(events) > settings.timeline_turns
    lines = _lines(ctx, status)
    return SessionInspection(
        status=status,
        facts=tuple(facts),
        timeline=tuple(
            timeline_point(e.turn or 0, e.created_at, e.payload, lines)
            for e in events[-settings.timeline_turns :]
        ),
        timeline_truncated=truncated,
        archive=archive,
        turn=_detail(asked),
        notes_absence=notes_absence(bool(status.notes and status.notes.text), spoken, messages),
    )


def _event_of(events: list[EventRow], turn: int | None) -> EventRow | None:
    if turn is None:
        return events[-1] if events else None
    return next((e for e in events if e.turn == turn), None)


def _detail(event: EventRow | None) -> TurnRecallDetail | None:
    if event is None or event.turn is None:
        return None
    return recall_detail(event.turn, event.created_at, event.payload)


async def trace_detail(
    ctx: ServiceContext, tenant_id: str, session_id: str, text: str, turn: int | None
) -> DetailTrace:
    """Where `text` (matched case-insensitively) was at `turn` (None: the newest): not stored,
    not found, found but not in the top k, or in the prompt; and every place holding it."""
    settings = ctx.settings.inspector
    needle = text.strip()
    if not needle or len(needle) > settings.max_trace_chars:
        raise OverLimit(
            f"the text to trace holds 1 to {settings.max_trace_chars} characters",
            field="text",
            limit=settings.max_trace_chars,
            got=len(needle),
        )
    async with ctx.database.transaction() as db:
        row = await owned_session(db, tenant_id, session_id)
        last = turn if turn is not None else row.turn_count
        event = await event_store.turn_event(db, row.id, last)
        window = await session_store.window_messages(db, row.id)
        chunks, searched = await inspector_store.chunks_holding(
            db, row.id, needle, settings.trace_max_chunks
        )
    if event is None or event.turn is None:
        raise TurnNotFound("the session recorded no such turn", turn=last)
    lowered = needle.casefold()
    in_window = [(m.seq, m.turn) for m in window if lowered in m.message.text.casefold()]
    trace = recall_detail(event.turn, event.created_at, event.payload).as_trace()
    verdict, places = locate(in_window, chunks, trace)
    return DetailTrace(
        turn=event.turn,
        verdict=verdict,
        places=places,
        chunks_searched=searched,
        searched_all=searched < settings.trace_max_chunks,
    )
