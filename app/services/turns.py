"""The turn use case (docs/DESIGN.md §3): store the new messages, offload when the
watermark is crossed, answer with the assembled prompt as a `TurnResult`.

Flow: lock the session row and read it → plan (pure). A turn that needs nothing but the
database (most turns: no recall search, chunks queued for the embedding worker, no notes
model) then writes everything in that same transaction, as the floor would. Any other turn
lets the lock go, runs recall (the query embedding may already be under way, started before
the read) and the models, and writes in a second transaction that locks the row again and
checks the version it read; a mismatch re-plans. No lock or transaction is held across an
embedder or model call. A crash anywhere before commit leaves the session as it was. A retry
under an Idempotency-Key already answered gets the first answer back, read from the
idempotency row, and writes nothing.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pydantic import TypeAdapter
from sqlalchemy.ext.asyncio import AsyncSession

from app import metrics
from app.core.assemble import PromptParts, assemble
from app.core.errors import IdempotencyKeyReused, ReplayForgotten, SessionBusy
from app.core.facts import Fact
from app.core.formats import SystemPrompt
from app.core.notes import NotesBody
from app.core.plan import Snapshot, TurnInput, TurnPlan, plan_turn
from app.core.results import HistoryMatch, TurnResult
from app.core.rewrite import RewrittenQuery
from app.core.transcript import StoredEntry, reconcile
from app.core.types import JsonObject, WindowMessage
from app.services.carry import facts_to_carry
from app.services.context import ServiceContext
from app.services.notes import (
    NotesDraft,
    NotesUpdate,
    drafted_notes,
    update_notes,
    waits_on_chat_model,
)
from app.services.offload import build_batch
from app.services.policies import plan_policy
from app.services.sessions import locked_session, owned
from app.services.turn_recall import (
    archive_in_reach,
    recall_for_turn,
    recall_skip_reason,
    start_query_embedding,
    turn_query,
)
from app.services.turn_result import Outcome, event_payload, turn_result
from app.store import chunks as chunk_store
from app.store import events as event_store
from app.store import facts as fact_store
from app.store import sessions as session_store
from app.store import statements
from app.store import transcript as transcript_store
from app.store.models import NoteRow, SessionRow
from app.store.transcript import ArchivedBranch


class VersionConflict(Exception):
    """Another turn of the session committed after our snapshot."""


# How a turn's answer is kept for replays (the idempotency row's JSON column) and read back.
STORED_RESULT: TypeAdapter[TurnResult] = TypeAdapter(TurnResult)


async def load_snapshot(ctx: ServiceContext, inp: TurnInput) -> Snapshot | TurnResult:
    """The session as it stands before planning (in a transaction of its own), or the turn's
    first answer when this is a retry under an Idempotency-Key that was already answered."""
    async with ctx.database.transaction() as db:
        return (await _read(db, ctx, inp, lock=False))[0]


async def _read(
    db: AsyncSession, ctx: ServiceContext, inp: TurnInput, *, lock: bool
) -> tuple[Snapshot | TurnResult, SessionRow | None]:
    """The snapshot and the session's row (None for a new session). `lock`: the row stays
    locked until `db` commits (a turn written in one transaction)."""
    found = await session_store.session_with_notes(db, inp.key, lock=lock)
    if found is None:
        return await _with_carried(db, inp, Snapshot(exists=False)), None
    row, notes, has_chunks = found
    owned(row, inp.tenant_id, inp.session_id)
    answered = await _answered(db, inp)
    if answered is not None:
        return answered, row
    window = await session_store.window_messages(db, inp.key)
    facts = await fact_store.current_facts(db, inp.key, ctx.settings.notes.recent_resolved)
    transcript = await transcript_store.live_transcript(db, inp.key) if inp.whole_history else ()
    snap = _snapshot(row, notes, has_chunks, window, facts, transcript)
    return await _with_carried(db, inp, snap), row


async def _with_carried(db: AsyncSession, inp: TurnInput, snap: Snapshot) -> Snapshot:
    """The snapshot with the facts the turn's `carry_facts` brings (refused with nothing
    written when they are not active facts of the tenant's named session)."""
    if inp.carry_facts is None:
        return snap
    carried = await facts_to_carry(db, inp.tenant_id, inp.session_id, inp.carry_facts)
    return replace(snap, carried=tuple(carried))


def _snapshot(
    row: SessionRow,
    notes: NoteRow | None,
    has_chunks: bool,
    window: list[WindowMessage],
    facts: list[Fact],
    transcript: Sequence[StoredEntry],
) -> Snapshot:
    return Snapshot(
        exists=True,
        version=row.version,
        turn_count=row.turn_count,
        next_seq=row.next_seq,
        model=row.model,
        context_window=row.context_window,
        reserve_tokens=row.reserve_tokens,
        system_prompt=stored_system(row),
        tools=row.tools,
        c0_tokens=row.c0_tokens,
        policy=dict(row.policy),
        calibration_ratio=row.calibration_ratio,
        last_prompt_estimate=row.last_prompt_estimate,
        last_offload_turn=row.last_offload_turn,
        offload_until_tokens=row.offload_until_tokens,
        window=window,
        notes_text=notes.rendered if notes and notes.rendered else None,
        notes_tokens=notes.tokens if notes else 0,
        notes_body=NotesBody.from_json(notes.body) if notes else NotesBody(),
        notes_needs_rebuild=notes.needs_rebuild if notes else False,
        notes_exists=notes is not None,
        facts=facts,
        has_chunks=has_chunks,
        transcript=transcript,
    )


def stored_system(row: SessionRow) -> SystemPrompt | None:
    """C0 as the session keeps it: as posted, or (sessions from before formats) its text."""
    if row.system_posted is not None:
        return SystemPrompt.from_json(row.system_posted)
    return SystemPrompt(row.system_prompt) if row.system_prompt is not None else None


async def _answered(db: AsyncSession, inp: TurnInput) -> TurnResult | None:
    """The first answer to this Idempotency-Key, if the turn was answered already."""
    if not inp.idempotency_key:
        return None
    found = await event_store.find_idempotent(db, inp.key, inp.idempotency_key)
    if found is None:
        return None
    if found.request_hash != inp.request_hash:
        raise IdempotencyKeyReused(
            "this Idempotency-Key was used for a different request body",
            header="Idempotency-Key",
        )
    if found.response is None:
        raise ReplayForgotten(
            "this turn was answered already, and a forget has since deleted the answer; "
            "it is not stored again (send a new Idempotency-Key to post it as a new turn)",
            header="Idempotency-Key",
        )
    return STORED_RESULT.validate_python(found.response)


async def run_turn(ctx: ServiceContext, inp: TurnInput) -> TurnResult:
    """Turns of one session queue on an in-process lock; across replicas the version check
    makes a turn that lost the race re-plan, after a jittered, growing pause."""
    with ctx.turns_in_flight.track():  # the in-process embedding worker waits for it
        return await _run_locked(ctx, inp)


async def _run_locked(ctx: ServiceContext, inp: TurnInput) -> TurnResult:
    settings = ctx.settings.db
    async with ctx.locks.for_session(inp.key):
        for attempt in range(settings.turn_retries):
            try:
                return await _attempt(ctx, inp)
            except VersionConflict:
                pause = min(settings.retry_backoff_max_s, settings.retry_backoff_s * 2**attempt)
                await asyncio.sleep(random.uniform(0, pause))
    raise SessionBusy("other turns of this session kept committing first; retry the turn")


async def _attempt(ctx: ServiceContext, inp: TurnInput) -> TurnResult:
    """A turn that needs nothing outside the database (no recall search, no embedding on its
    path, no notes model) is read, planned and written in one transaction under the session's
    row lock. Any other turn reads, lets the lock go while recall and the models work, and
    writes in a second transaction that checks the version it read."""
    started = time.perf_counter()
    # Read before the session only where its embedding may start early; else after the read,
    # and only when the session has an archive to search (`_planned`).
    query = turn_query(ctx, inp) if inp.key in ctx.archive_hint else None
    early = start_query_embedding(ctx, inp, query)
    with statements.counting() as sent:
        try:
            result, kind = await _attempt_counted(ctx, inp, query, started)
        finally:
            if early is not None:
                early.cancel()  # a no-op when recall used it; its vector stays cached
    metrics.TURN_STATEMENTS.labels(kind=kind).observe(sent.round_trips)
    return result


async def _attempt_counted(
    ctx: ServiceContext, inp: TurnInput, query: RewrittenQuery | None, started: float
) -> tuple[TurnResult, str]:
    if inp.whole_history:  # it may first archive a branch: always two phases
        return await _whole_history_turn(ctx, inp, started)
    async with ctx.database.transaction() as db:
        snap, row = await _read(db, ctx, inp, lock=True)
        if isinstance(snap, TurnResult):
            return snap, "replay"
        planned = _planned(ctx, inp, query, snap, started)
        written = None
        if not _needs_outside_work(planned, inp, snap):
            written = await _complete_and_write(db, planned, inp, snap, row)
    if written is not None:
        outcome, result = written
        _after_commit(planned.ctx, inp, outcome, result)
        return result, _kind(outcome)
    # The lock is released: recall and the models work with no transaction open.
    outcome, draft, clock = await _complete(planned, inp, snap, history=None)
    return await commit_turn(planned.ctx, inp, snap, outcome, draft, clock), _kind(outcome)


async def _complete_and_write(
    db: AsyncSession, planned: Planned, inp: TurnInput, snap: Snapshot, row: SessionRow | None
) -> tuple[Outcome, TurnResult]:
    """The rest of a turn that needs only the database, in `db`, which holds `row`'s lock
    since the read (a new session's row is created here)."""
    outcome, draft, clock = await _complete(planned, inp, snap, history=None)
    row = row or await _create(db, inp, snap)
    return outcome, await _write_turn(db, planned.ctx, inp, snap, outcome, draft, clock, row)


async def _whole_history_turn(
    ctx: ServiceContext, inp: TurnInput, started: float
) -> tuple[TurnResult, str]:
    found = await load_snapshot(ctx, inp)
    if isinstance(found, TurnResult):
        return found, "replay"
    inp, snap, history = await _reconciled(ctx, inp, found)
    # Read after reconciling: the new messages may not hold the history's last user message.
    planned = await ctx.throttle.run(_planned, ctx, inp, None, snap, started)
    outcome, draft, clock = await _complete(planned, inp, snap, history=history)
    return await commit_turn(planned.ctx, inp, snap, outcome, draft, clock), _kind(outcome)


def _kind(outcome: Outcome) -> str:
    """The turn's kind for the statements histogram."""
    if outcome.plan.offloaded:
        return "offload"
    return "quiet" if outcome.recall.skipped_reason else "recall"


@dataclass(frozen=True)
class Planned:
    ctx: ServiceContext  # counting tokens as the turn's model does
    query: RewrittenQuery | None  # read once (`turn_query`); None: no user words or no archive
    plan: TurnPlan
    timings: dict[str, float]
    started: float
    notes_draft: NotesDraft | None = None  # the extraction an offload's plan drafted


def _planned(
    ctx: ServiceContext,
    inp: TurnInput,
    query: RewrittenQuery | None,
    snap: Snapshot,
    started: float,
) -> Planned:
    if snap.has_chunks:  # the next turn may start its query embedding before the read
        ctx.archive_hint.add(inp.key)
    else:
        ctx.archive_hint.discard(inp.key)
    ctx = ctx.for_model(inp.model or snap.model or ctx.settings.default_model)
    timings = {"db_read": _ms_since(started)}
    mark = time.perf_counter()
    rules = plan_policy(ctx.settings)
    plan = plan_turn(inp, snap, ctx.counter, rules, ctx.clock(), ctx.new_id)
    drafted = drafted_notes(ctx, snap, plan) if plan.offloaded else None
    if drafted is not None:  # the batch makes room for the notes as they will come out
        plan = plan_turn(inp, snap, ctx.counter, rules, ctx.clock(), ctx.new_id, drafted.tokens)
    timings["plan"] = _ms_since(mark)
    if query is None and archive_in_reach(snap, plan):
        query = turn_query(ctx, inp)
    return Planned(ctx, query, plan, timings, started, drafted)


def _needs_outside_work(planned: Planned, inp: TurnInput, snap: Snapshot) -> bool:
    """Whether the turn must wait on something besides the database: a recall search (the
    query embedding), chunks embedded inline, or the chat model (facts or notes)."""
    ctx, plan = planned.ctx, planned.plan
    if recall_skip_reason(inp, planned.query, snap, plan) is None:
        return True
    chunks_to_build = plan.offloaded or bool(plan.oversize_drafts)
    if chunks_to_build and ctx.settings.embedder.offload_embedding == "inline":
        return True
    return waits_on_chat_model(ctx, snap, plan)


async def _complete(
    planned: Planned, inp: TurnInput, snap: Snapshot, *, history: HistoryMatch | None
) -> tuple[Outcome, TurnResult, Stopwatch]:
    """Everything between the plan and the write: chunks, notes, recall, the prompt."""
    ctx, plan, timings = planned.ctx, planned.plan, dict(planned.timings)
    mark = time.perf_counter()
    batch = await build_batch(ctx, plan)
    timings["embed"] = _ms_since(mark)
    mark = time.perf_counter()
    notes = await update_notes(ctx, snap, plan, planned.notes_draft)
    notes_delta = 0 if notes.tokens is None else notes.tokens - snap.notes_tokens
    timings["notes"] = _ms_since(mark)
    mark = time.perf_counter()
    recall = await recall_for_turn(
        ctx,
        inp,
        planned.query,
        snap,
        plan,
        batch,
        extra_tokens=notes_delta,
        notes_text=notes.text(snap.notes_text),
    )
    timings["recall"] = _ms_since(mark)
    timings.update({f"recall_{k}": v for k, v in recall.timings_ms.items()})
    mark = time.perf_counter()
    outcome = Outcome(plan, batch, notes, notes_delta, recall, recall.window(plan))
    parts = PromptParts(
        system=plan.config.system_prompt,
        notes=notes.text(snap.notes_text),
        window=outcome.window,
        current_turn=plan.turn,
        format=inp.prompt_format,
    )
    prompt = await ctx.throttle.run(assemble, parts)
    timings["assemble"] = _ms_since(mark)
    draft = replace(turn_result(inp, snap, outcome, prompt, timings), history=history)
    return outcome, draft, Stopwatch(started=planned.started, write_started=time.perf_counter())


async def _reconciled(
    ctx: ServiceContext, inp: TurnInput, snap: Snapshot
) -> tuple[TurnInput, Snapshot, HistoryMatch]:
    """A whole-history turn as an ordinary one: the messages the transcript lacks. A history
    that diverges first archives the stored branch (its own transaction, version-checked),
    and the session is read again; a fault between the two leaves a transcript the retry
    reconciles with as a plain append."""
    found = await ctx.throttle.run(reconcile, snap.transcript, inp.messages)
    archived = None
    if found.branch_from is not None:
        archived = await _archive(ctx, inp, snap, found.branch_from)
        again = await load_snapshot(ctx, inp)
        if isinstance(again, TurnResult):  # the same key was answered meanwhile: replay it
            raise VersionConflict
        snap, found = again, await ctx.throttle.run(reconcile, again.transcript, inp.messages)
    history = HistoryMatch(
        matched=found.matched,
        added=len(found.new),
        archived_from_seq=archived.from_seq if archived else None,
        archived_messages=archived.messages if archived else 0,
    )
    return replace(inp, messages=found.new), snap, history


async def _archive(
    ctx: ServiceContext, inp: TurnInput, snap: Snapshot, from_seq: int
) -> ArchivedBranch:
    async with ctx.database.transaction() as db:
        row = await locked_session(db, inp.tenant_id, inp.session_id)
        if row.version != snap.version:
            raise VersionConflict
        archived = await transcript_store.archive_branch(
            db, inp.key, from_seq, archived_at_turn=row.turn_count + 1
        )
        session_store.bump_version(row)
        await event_store.record_event(
            db, inp.key, row.turn_count + 1, "branch", branch_payload(archived)
        )
    return archived


def branch_payload(archived: ArchivedBranch) -> JsonObject:
    """The event of an archived branch: seqs, counts and chunk ids, never text."""
    return {
        "from_seq": archived.from_seq,
        "from_turn": archived.from_turn,
        "messages": archived.messages,
        "chunk_ids": list(archived.chunk_ids),
        "facts_retired": archived.facts_retired,
        "facts_restored": archived.facts_restored,
    }


@dataclass(frozen=True)
class Stopwatch:
    """Closes the turn's timings just before the answer is stored for replays, so a retry
    with the same Idempotency-Key gets exactly the first answer (the COMMIT round trip is
    the only part not counted)."""

    started: float
    write_started: float

    def finish(self, result: TurnResult) -> TurnResult:
        timings = {
            **result.timings_ms,
            "db_write": _ms_since(self.write_started),
            "total": _ms_since(self.started),
        }
        return replace(result, timings_ms=timings)


def _ms_since(mark: float) -> float:
    return round((time.perf_counter() - mark) * 1000, 3)


async def commit_turn(
    ctx: ServiceContext,
    inp: TurnInput,
    snap: Snapshot,
    outcome: Outcome,
    draft: TurnResult,
    clock: Stopwatch,
) -> TurnResult:
    """Writes a turn planned outside the lock, in one transaction that takes the lock and
    checks the version it was planned on. A retry of the same Idempotency-Key that
    committed first is answered instead, writing nothing."""
    async with ctx.database.transaction() as db:
        if not snap.exists:
            await session_store.create_session(db, inp.key, inp.tenant_id)
        row = await locked_session(db, inp.tenant_id, inp.session_id)
        answered = await _answered(db, inp)
        if answered is not None:
            return answered
        if row.version != snap.version:
            raise VersionConflict
        result = await _write_turn(db, ctx, inp, snap, outcome, draft, clock, row)
    _after_commit(ctx, inp, outcome, result)
    return result


async def _create(db: AsyncSession, inp: TurnInput, snap: Snapshot) -> SessionRow:
    """A new session's row, in the turn's transaction; another turn that created it first
    makes this one plan again on what that turn wrote."""
    await session_store.create_session(db, inp.key, inp.tenant_id)
    row = await locked_session(db, inp.tenant_id, inp.session_id)
    if row.version != snap.version:
        raise VersionConflict
    return row


async def _write_turn(
    db: AsyncSession,
    ctx: ServiceContext,
    inp: TurnInput,
    snap: Snapshot,
    outcome: Outcome,
    draft: TurnResult,
    clock: Stopwatch,
    row: SessionRow,
) -> TurnResult:
    """Every write of the turn, in `db`, whose transaction holds `row`'s lock."""
    plan, batch = outcome.plan, outcome.batch
    if plan.clears_recall:  # before this turn's own block is written
        await session_store.clear_recalled(db, inp.key)
    elif outcome.recall.dropped_seqs:
        await session_store.clear_recalled(db, inp.key, outcome.recall.dropped_seqs)
    await session_store.insert_messages(db, inp.key, outcome.new_messages)
    await chunk_store.insert_chunks(
        db, inp.key, batch.chunks, ctx.embedder.model_name, archived_turn=plan.turn
    )
    await session_store.mark_offloaded(db, inp.key, batch.chunk_of())
    await _write_notes(db, inp.key, plan.turn, outcome.notes, snap)
    _update_session_row(row, outcome)
    result = clock.finish(draft)
    await event_store.record_event(db, inp.key, plan.turn, "turn", event_payload(outcome, result))
    if inp.idempotency_key:
        await event_store.save_idempotent(
            db,
            inp.key,
            inp.idempotency_key,
            inp.request_hash,
            STORED_RESULT.dump_python(result, mode="json"),
        )
    return result


def _after_commit(
    ctx: ServiceContext, inp: TurnInput, outcome: Outcome, result: TurnResult
) -> None:
    metrics.observe_turn(result)
    if outcome.batch.queued:
        ctx.embedding_wakeup.set()  # this process's worker embeds what the turn queued
    if outcome.batch.chunks:
        ctx.archive_hint.add(inp.key)


async def _write_notes(
    db: AsyncSession, session_id: str, turn: int, notes: NotesUpdate, snap: Snapshot
) -> None:
    changes = notes.changes
    ids = await fact_store.insert_facts(db, session_id, changes.new, turn)
    for old, by in changes.superseded:
        await fact_store.supersede(db, session_id, old, ids[by] if by is not None else None)
    for fact_id in changes.resolved:
        await fact_store.resolve(db, session_id, fact_id, turn)
    await fact_store.expire(db, session_id, changes.expired)
    unchanged = (
        snap.notes_exists
        and notes.rendered is None
        and notes.body == snap.notes_body
        and notes.needs_rebuild == snap.notes_needs_rebuild
    )
    if unchanged:  # most turns: skip the round trip
        return
    await fact_store.save_notes(
        db,
        session_id,
        body=notes.body.to_json(),
        rendered=notes.rendered,
        tokens=notes.tokens,
        needs_rebuild=notes.needs_rebuild,
    )


def _update_session_row(row: SessionRow, outcome: Outcome) -> None:
    plan = outcome.plan
    config = plan.config
    session_store.bump_version(row)
    row.turn_count = plan.turn
    row.next_seq += len(plan.new_messages)
    row.model = config.model
    row.context_window = config.context_window_override
    row.reserve_tokens = config.reserve_tokens
    row.system_prompt = config.system_prompt.text if config.system_prompt else None
    row.system_posted = config.system_prompt.to_json() if config.system_prompt else None
    row.tools = config.tools
    row.c0_tokens = config.c0_tokens
    row.policy = config.policy_overrides
    row.calibration_ratio = plan.calibration_ratio
    row.last_prompt_estimate = outcome.estimate_sent
    row.last_window_estimate = outcome.estimate_without_recall
    if plan.offloaded or plan.clears_recall:
        row.last_offload_turn = plan.turn
    row.offload_until_tokens = None  # a manual offload is carried out by one turn
