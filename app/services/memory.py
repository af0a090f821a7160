"""The `memory` tool's writing operations (docs/DESIGN.md §6): remember, the
manual offload, and the two-step forget. Reading (`recall`, `status`) is the sessions' own use
cases.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app import metrics
from app.core.assemble import notes_block
from app.core.chunker import remember_draft
from app.core.errors import (
    ChunkNotFound,
    ForgetRequestNotFound,
    InvalidForget,
    RateLimited,
    RememberEmpty,
    RememberTooLong,
)
from app.core.facts import Fact, FactKind, SourceMessage, extract
from app.core.forget import (
    Forgotten,
    body_without,
    derived_fact,
    scrubbed_payload,
    stub_replacement,
)
from app.core.formats import stubbed
from app.core.notes import NotesBody, render
from app.core.results import (
    ForgetDone,
    ForgetPending,
    ForgetPreview,
    OffloadScheduled,
    RememberResult,
)
from app.core.tokens import count_message, count_text_block
from app.core.types import ChunkKind, EmbeddedChunk, JsonObject
from app.services.auth import Principal
from app.services.context import ServiceContext
from app.services.notes import text_cap
from app.services.offload import embed_passages
from app.services.policies import notes_limits
from app.services.recall import vector_scan
from app.services.sessions import locked_session, owned_session, watermark_view
from app.store import chunks as chunk_store
from app.store import events as event_store
from app.store import facts as fact_store
from app.store import forget as forget_store
from app.store import recall as recall_store
from app.store import sessions as session_store
from app.store.models import ChunkRow

RATE_WINDOW = timedelta(minutes=1)
FACT_TAGS = {"constraint": FactKind.CONSTRAINT, "preference": FactKind.PREFERENCE}
REMEMBERED_KINDS = frozenset(FACT_TAGS.values())
REMEMBER_ROLE = "memory"


# --- remember ---------------------------------------------------------------------------------


def remembered_facts(text: str, tags: Sequence[str], turn: int) -> list[Fact]:
    """The constraints and preferences the text states; or the whole text as one, when a tag
    says so and the extractor found none."""
    found = [
        replace(fact, source_seq=None)
        for fact in extract([SourceMessage(0, turn, "user", text)], []).new
        if fact.kind in REMEMBERED_KINDS
    ]
    tagged = [FACT_TAGS[tag] for tag in tags if tag in FACT_TAGS]
    if found or not tagged:
        return found
    return [Fact(kind=tagged[0], text=text, source_turn=turn, source_seq=None)]


async def _nearest_duplicate(
    ctx: ServiceContext, db: AsyncSession, key: str, vector: list[float] | None
) -> str | None:
    if vector is None:
        return None
    nearest = await recall_store.unit_candidates(
        db,
        key,
        ctx.embedder.model_name,
        vector,
        vector,
        1,
        vector_scan(ctx.settings.recall),
    )
    if nearest and nearest[0].similarity >= ctx.settings.memory.duplicate_similarity:
        return nearest[0].chunk_id
    return None


async def _check_rate(ctx: ServiceContext, db: AsyncSession, key: str) -> None:
    limit = ctx.settings.memory.remember_per_minute
    since = ctx.clock() - RATE_WINDOW
    count, oldest = await chunk_store.written_since(db, key, ChunkKind.REMEMBER, since)
    if count < limit:
        return
    wait = max(1, int((oldest + RATE_WINDOW - ctx.clock()).total_seconds()) + 1)
    raise RateLimited(
        f"at most {limit} remember calls per minute per session",
        limit=limit,
        retry_after_s=wait,
    )


async def remember(
    ctx: ServiceContext, tenant_id: str, session_id: str, text: str, tags: Sequence[str]
) -> RememberResult:
    """Stores one point as a `remember` chunk (and a fact when it is a constraint or a
    preference). A duplicate, by hash or by vector, answers the existing chunk's id."""
    text = text.strip()
    if not text:
        raise RememberEmpty("remember needs some text besides white space", field="text")
    cap = ctx.settings.memory.remember_max_chars
    if len(text) > cap:
        raise RememberTooLong(
            f"remember takes at most {cap} characters", field="text", limit=cap, got=len(text)
        )
    async with ctx.database.transaction() as db:  # 404 before any embedding work
        await owned_session(db, tenant_id, session_id)
    vectors = await embed_passages(ctx, [text])
    vector = vectors[0] if vectors else None
    unit_vectors = (vector,) if vector is not None else None
    draft = remember_draft(
        ctx.new_id(), text, ctx.counter.count(text), 0, ctx.clock(), REMEMBER_ROLE
    )
    async with ctx.database.transaction() as db:
        row = await locked_session(db, tenant_id, session_id)
        existing = await chunk_store.chunk_with_hash(db, row.id, draft.content_hash)
        existing = existing or await _nearest_duplicate(ctx, db, row.id, vector)
        if existing is not None:
            return RememberResult(chunk_id=existing, duplicate=True)
        await _check_rate(ctx, db, row.id)
        draft = replace(draft, turn_start=row.turn_count, turn_end=row.turn_count)
        await chunk_store.insert_chunks(
            db,
            row.id,
            [EmbeddedChunk(draft, vector, unit_vectors)],
            ctx.embedder.model_name,
            archived_turn=row.turn_count + 1,  # the next turn is the first that can recall it
        )
        facts = remembered_facts(text, tags, row.turn_count)
        if facts:
            await fact_store.insert_facts(db, row.id, facts, row.turn_count)
            await fact_store.mark_notes_stale(db, row.id)
            session_store.bump_version(row)  # a turn in flight cannot clear the stale mark
        await event_store.record_event(
            db,
            row.id,
            row.turn_count,
            "remember",
            {"chunk_id": draft.id, "tags": list(tags), "tokens": draft.tokens, "facts": len(facts)},
        )
    metrics.REMEMBERED.inc()
    return RememberResult(
        chunk_id=draft.id, duplicate=False, facts=tuple(fact.kind for fact in facts)
    )


# --- offload ----------------------------------------------------------------------------------


async def schedule_offload(
    ctx: ServiceContext, tenant_id: str, session_id: str, until_tokens: int | None
) -> OffloadScheduled:
    """Asks the session's next turn to offload down to `until_tokens` (default: the policy's
    target). The prompt already sent cannot change, so the next turn is the first that can;
    it goes through the turn's one transaction like any offload. Asked for on purpose, it
    may move turns the floor would keep; the turn being posted always stays."""
    async with ctx.database.transaction() as db:
        row = await locked_session(db, tenant_id, session_id)
        view = watermark_view(ctx.settings, row)
        prompt = view.prompt_tokens if view else 0
        goal = until_tokens if until_tokens is not None else view.levels.target if view else None
        row.offload_until_tokens = goal
        session_store.bump_version(row)  # a turn in flight re-plans and carries it out
    return OffloadScheduled(scheduled=goal is not None, until_tokens=goal, prompt_tokens=prompt)


# --- forget -----------------------------------------------------------------------------------


def _preview(chunk: ChunkRow) -> ForgetPreview:
    return ForgetPreview(
        chunk_id=chunk.id,
        kind=chunk.kind,
        turn_range=(chunk.turn_start, chunk.turn_end),
        tokens=chunk.tokens,
        summary_hint=chunk.summary_hint,
    )


async def request_forget(
    ctx: ServiceContext,
    caller: Principal,
    session_id: str,
    *,
    chunk_id: str | None,
    turn_start: int | None,
    turn_end: int | None,
) -> ForgetPending:
    """Step one: what would be deleted, and the id that deletes it once confirmed."""
    by_range = turn_start is not None or turn_end is not None
    if (chunk_id is not None) == by_range:
        raise InvalidForget("name either chunk_id or turn_start and turn_end, not both")
    if by_range and (turn_start is None or turn_end is None or turn_end < turn_start):
        raise InvalidForget("a turn range needs turn_start <= turn_end")
    async with ctx.database.transaction() as db:
        key = (await owned_session(db, caller.tenant_id, session_id)).id
        if chunk_id is not None:
            chunks = await chunk_store.chunks_by_id(db, key, [chunk_id])
        else:
            assert turn_start is not None and turn_end is not None
            chunks = await chunk_store.chunks_in_turns(db, key, turn_start, turn_end)
        if not chunks:
            raise ChunkNotFound(
                "no stored chunk matches; messages still in the window are forgotten once "
                "offloaded",
                chunk_id=chunk_id,
                turn_range=[turn_start, turn_end] if by_range else None,
            )
        request_id = f"fg_{uuid.uuid4().hex[:20]}"
        expires = ctx.clock() + timedelta(seconds=ctx.settings.memory.forget_ttl_s)
        ids = [chunk.id for chunk in chunks]
        await forget_store.add_request(db, key, request_id, ids, caller.key_prefix, expires)
        await event_store.record_event(
            db,
            key,
            None,
            "forget_requested",
            {"request_id": request_id, "chunk_ids": ids, "requested_by": caller.key_prefix},
        )
    return ForgetPending(
        pending_id=request_id,
        expires_at=expires,
        preview=tuple(_preview(chunk) for chunk in chunks),
    )


async def confirm_forget(
    ctx: ServiceContext, caller: Principal, session_id: str, request_id: str
) -> ForgetDone:
    """Step two: deletes the chunks (rows, vectors, lexical terms), their messages' places,
    the facts and notes items taken from them, their text in events, and every replayable
    response; leaves one audit event that names ids only."""
    async with ctx.database.transaction() as db:
        row = await locked_session(db, caller.tenant_id, session_id)
        request = await forget_store.take_request(db, row.id, request_id, ctx.clock())
        if request is None:
            raise ForgetRequestNotFound(
                "no pending forget with this id (unknown, already done, or expired)",
                pending_id=request_id,
            )
        chunks = await chunk_store.chunks_by_id(db, row.id, request.chunk_ids)
        forgotten = _forgotten(chunks)
        facts_deleted = await _forget_derived(ctx, db, row.id, chunks, forgotten)
        deleted = await chunk_store.delete_chunks(db, row.id, [c.id for c in chunks])
        await chunk_store.drop_unreferenced_blobs(db, row.id)
        session_store.bump_version(row)  # a turn planned before this re-plans without the text
        done = ForgetDone(
            chunks_deleted=deleted,
            request_id=request_id,
            chunk_ids=tuple(c.id for c in chunks),
            turn_ranges=tuple((c.turn_start, c.turn_end) for c in chunks),
            tokens=sum(c.tokens for c in chunks),
            facts_deleted=facts_deleted,
            requested_by=request.requested_by,
            confirmed_by=caller.key_prefix,
        )
        await event_store.record_event(db, row.id, row.turn_count, "forget", _audit(done))
    metrics.FORGOTTEN_CHUNKS.inc(deleted)
    return done


def _audit(done: ForgetDone) -> JsonObject:
    """The forget's event row: ids and counts only, never the deleted text."""
    return {
        "request_id": done.request_id,
        "chunk_ids": list(done.chunk_ids),
        "turn_ranges": [list(r) for r in done.turn_ranges],
        "tokens": done.tokens,
        "facts_deleted": done.facts_deleted,
        "requested_by": done.requested_by,
        "confirmed_by": done.confirmed_by,
    }


def _forgotten(chunks: list[ChunkRow]) -> Forgotten:
    """Remembered points are no messages: only offloaded chunks name seqs and turns."""
    offloaded = [c for c in chunks if c.kind != ChunkKind.REMEMBER]
    return Forgotten(
        texts=[c.raw_text for c in chunks],
        seqs={seq for c in offloaded for seq in range(c.seq_start, c.seq_end + 1)},
        turns={turn for c in offloaded for turn in range(c.turn_start, c.turn_end + 1)},
    )


async def _forget_derived(
    ctx: ServiceContext,
    db: AsyncSession,
    key: str,
    chunks: list[ChunkRow],
    forgotten: Forgotten,
) -> int:
    ids = [c.id for c in chunks]
    await forget_store.drop_offloaded_messages(db, key, ids)
    await session_store.drop_recalled_quoting(db, key, ids)
    for stub in await forget_store.stub_messages(db, key, ids):
        replaced = stubbed(
            session_store.stored_message(stub), stub_replacement(stub.stub_chunk_id or "")
        )
        stub.format, stub.posted = session_store.posted_json(replaced)
        stub.content, stub.tool_calls = None, None
        stub.tokens = count_message(ctx.counter, replaced)
    facts = [
        f.id
        for f in await forget_store.session_facts(db, key)
        if derived_fact(forgotten, f.text, f.source_seq)
    ]
    await forget_store.delete_facts(db, key, facts)
    for event in await forget_store.session_events(db, key):
        scrubbed = scrubbed_payload(event.payload, event.turn, forgotten)
        if scrubbed is not None:
            event.payload = scrubbed
    await forget_store.drop_replays(db, key)
    await _rewrite_notes(ctx, db, key, forgotten)
    return len(facts)


async def _rewrite_notes(
    ctx: ServiceContext, db: AsyncSession, key: str, forgotten: Forgotten
) -> None:
    notes = await session_store.notes_for(db, key)
    if notes is None:
        return
    body = body_without(NotesBody.from_json(notes.body), forgotten)
    facts = await fact_store.current_facts(db, key, ctx.settings.notes.recent_resolved)
    # A forget only takes lines out: the notes never grow past what the window already held.
    cap = min(ctx.settings.notes.cap_tokens, text_cap(ctx, notes.tokens))
    rendered = render(
        body, facts, cap_tokens=cap, count=ctx.counter.count, limits=notes_limits(ctx.settings)
    )
    await fact_store.save_notes(
        db,
        key,
        body=body.to_json(),
        rendered=rendered,
        tokens=count_text_block(ctx.counter, notes_block(rendered)),
        needs_rebuild=False,
    )
