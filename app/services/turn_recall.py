"""What a turn recalls (docs/DESIGN.md §4, modes): skip rules, k and B for the level, the block.

- `off`: nothing. No user message in the turn (tool results only): nothing.
- C3 empty (nothing archived before or by this turn): nothing, and no embedding call at all.
  Nor for an `auto` turn that only acknowledges ("ok, thanks", `core.rewrite.is_acknowledgement`).
- Chunks still in the embedding queue are found by their words only; the summary counts them.
- `auto`: every turn once C3 exists, gated by a minimum similarity; a reference word
  ("刚才", "we agreed on") lifts the gate. `force`: never gated.
- A reference question or `force` with no hit injects the explicit no-match line (but not
  when hits exist and the budget has no room for them, or when they are in a block the
  window already holds).
- k and B tighten in emergency.
- A turn's block takes at most R, the recall share of C − r. It stays in the window as
  history until the next offload and is never injected again (docs/DESIGN.md §1). The blocks
  held and the new one share the room up to R above the emergency line, never past C − r
  (`core.plan.recall_room`); when the new one does not fit, it keeps its strongest items
  that do; only when not even the strongest fits do held blocks give way, newest first
  (`_fitted`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from app.core.assemble import anchor_seq, recalled_block
from app.core.budget import Level
from app.core.injection import (
    POINTERS_HEADER,
    InjectionRules,
    pointer_line,
    pointers_block,
)
from app.core.lexical import term_set
from app.core.messages import Message
from app.core.plan import Snapshot, TurnInput, TurnPlan, held_recall_tokens, recall_room
from app.core.recall_trace import CandidateTrace, RecallDecisions, trace_candidates
from app.core.rerank import NO_MATCH_LINE, Injected, ScoredHit, format_block, in_window
from app.core.results import RecalledChunk, RecallMode, TurnRecallSummary
from app.core.rewrite import (
    RewrittenQuery,
    is_acknowledgement,
    leans_on_recent,
    rewrite_alone,
    with_recent,
)
from app.core.tokens import count_text_block
from app.core.types import RecalledText, WindowMessage
from app.services.context import ServiceContext
from app.services.embedding import retrieve_late_failure
from app.services.offload import OffloadBatch
from app.services.recall import Retrieval, TurnTiering, embed_query, focus_terms, retrieve
from app.settings import RecallSettings


@dataclass
class TurnRecall:
    """What the turn's recall found and put in the prompt, filled in as it goes."""

    mode: RecallMode
    query: RewrittenQuery | None = None
    block: str | None = None
    tokens: int = 0
    hits: tuple[RecalledChunk, ...] = ()
    skipped_reason: str | None = None
    fallback: str | None = None
    no_match: bool = False
    need: str | None = None  # what the turn asks of the past (core.injection.Need)
    pointers: tuple[RecalledChunk, ...] = ()  # one-line pointers in the block, best first
    pointer_tokens: int = 0
    repeated: int = 0  # hits left out as near-duplicates of the prompt
    pending_chunks: int = 0  # searched by their words only: their vectors are not written yet
    # Window messages whose held blocks give way to this turn's (the room was full).
    dropped_seqs: set[int] = field(default_factory=set)
    timings_ms: dict[str, float] = field(default_factory=dict)
    # The best candidates with their scores and why each was or was not injected (the event).
    candidates: tuple[CandidateTrace, ...] = ()

    def window(self, plan: TurnPlan) -> list[WindowMessage]:
        """The window after the turn: this turn's block rides on its newest user message,
        where it stays, as history, until the next offload."""
        window = [
            replace(m, recalled=None) if m.seq in self.dropped_seqs else m
            for m in plan.window_after
        ]
        text = recalled_block(self.block)
        anchor = anchor_seq(window, plan.turn)
        if text is None or anchor is None:
            return list(window)
        held = RecalledText(text, self.tokens, tuple(hit.chunk_id for hit in self.hits))
        return [replace(m, recalled=held) if m.seq == anchor else m for m in window]

    def summary(self, window: Sequence[WindowMessage]) -> TurnRecallSummary:
        """`window`: C1 after the turn (its held blocks are reported beside this one)."""
        return TurnRecallSummary(
            mode=self.mode,
            query_raw=self.query.raw if self.query else None,
            query_rewritten=self.query.text if self.query else None,
            hits=self.hits,
            injected_tokens=self.tokens,
            no_match=self.no_match,
            skipped_reason=self.skipped_reason,
            fallback=self.fallback,
            held_tokens=held_recall_tokens(window) - (self.tokens if self.block else 0),
            cleared_held=bool(self.dropped_seqs),
            pending_chunks=self.pending_chunks,
            need=self.need,
            pointers=self.pointers,
            pointer_tokens=self.pointer_tokens,
            repeated=self.repeated,
        )


def held_chunk_ids(window: Sequence[WindowMessage]) -> set[str]:
    """Chunks a recalled block in the window already quotes: never injected twice."""
    return {cid for m in window if m.recalled is not None for cid in m.recalled.chunk_ids}


def _newest_user_message(inp: TurnInput) -> Message | None:
    for message in reversed(inp.messages):
        if message.role == "user" and message.words:
            return message
    return None


def _recent_texts(snap: Snapshot, context_turns: int) -> list[str]:
    if context_turns == 0:
        return []
    turns = sorted({m.turn for m in snap.window})[-context_turns:]
    return [m.message.text for m in snap.window if m.turn in turns and m.message.text]


def _limits(ctx: ServiceContext, plan: TurnPlan, extra_tokens: int) -> tuple[int, int, int]:
    """k; B for the level, within R (this turn's block); and the room recalled text held and
    new may fill together (`core.plan.recall_room`), in estimated tokens."""
    settings = ctx.settings.recall
    emergency = plan.level is Level.EMERGENCY
    top_k = settings.emergency_top_k if emergency else settings.top_k
    budget = settings.emergency_budget_tokens if emergency else settings.budget_tokens
    config = plan.config
    estimate = plan.estimate_after + extra_tokens
    room = recall_room(config.budget, config.policy, estimate, plan.calibration_ratio)
    # The block's header and the blank lines between items are not part of any item.
    overhead = count_text_block(ctx.counter, recalled_block("-")) + 2 * top_k
    return top_k, min(budget, max(0, room.block - overhead)), max(0, room.total - overhead)


def _make_room(
    window: Sequence[WindowMessage], room: int, wanted: int, answering: set[str], result: TurnRecall
) -> int:
    """Drops held blocks, newest first (the prompt before them stays the same), until they
    fit the room with `wanted` tokens to spare; one that holds this question's evidence goes
    only when the held blocks alone would pass the room. Answers the room left."""
    held = [m for m in window if m.recalled is not None and m.seq not in result.dropped_seqs]
    free = room - sum(m.recalled.tokens for m in held if m.recalled is not None)
    for sparing in (True, False):
        for message in reversed(held):
            if free >= (wanted if sparing else 0) or message.seq in result.dropped_seqs:
                continue
            assert message.recalled is not None
            if sparing and answering.intersection(message.recalled.chunk_ids):
                continue
            result.dropped_seqs.add(message.seq)
            free += message.recalled.tokens
    return free


def _fitted(
    items: list[Injected],
    window: Sequence[WindowMessage],
    room: int,
    answering: set[str],
    result: TurnRecall,
) -> list[Injected]:
    """The items that fit beside the blocks the window holds, the strongest first; held
    blocks give way only when not even the strongest fits (`_make_room`)."""
    strongest = sorted(items, key=lambda item: -item.hit.score)
    free = _make_room(window, room, strongest[0].tokens if strongest else 0, answering, result)
    kept: list[Injected] = []
    for item in strongest:
        if sum(k.tokens for k in kept) + item.tokens <= free:
            kept.append(item)
    return [item for item in items if item in kept]


def turn_query(ctx: ServiceContext, inp: TurnInput) -> RewrittenQuery | None:
    """The turn's newest user message read as a query, once per turn (`recall_for_turn` adds
    the recent turns where the question leans on them); None: the turn has no user words."""
    asked = _newest_user_message(inp)
    if asked is None:
        return None
    return rewrite_alone(
        asked.words[: ctx.settings.recall.max_query_chars],
        asked_at=asked.created_at or ctx.clock(),
    )


def archive_in_reach(snap: Snapshot, plan: TurnPlan) -> bool:
    """Whether anything is archived before or by this turn: else recall has nothing to search
    and the turn's question need not even be read."""
    return bool(snap.has_chunks or plan.offload_units or plan.oversize_drafts)


def recall_skip_reason(
    inp: TurnInput, query: RewrittenQuery | None, snap: Snapshot, plan: TurnPlan
) -> str | None:
    """Why the turn does not search the archive; None when it does. An `auto` turn that only
    acknowledges ("ok, thanks", "好的，继续") skips, as do turns with recall off, with nothing
    archived before or by this turn, or with no user input (`query` None)."""
    if inp.recall == "off":
        return "off"
    if not archive_in_reach(snap, plan):
        return "archive_empty"
    if query is None:
        return "no_user_input"
    if inp.recall == "auto" and is_acknowledgement(query):
        return "acknowledgement"
    return None


def start_query_embedding(
    ctx: ServiceContext, inp: TurnInput, query: RewrittenQuery | None
) -> asyncio.Future[tuple[list[float] | None, str | None]] | None:
    """Starts embedding the turn's query before its session is read, when this process saw
    the session with an archive and the turn will likely search it; recall later finds the
    vector in the query cache (or awaits the same call). None: nothing started. With a query
    rewriter the searched text is the model's, known only later; a query that leans on the
    recent turns is completed from them after the read."""
    if inp.key not in ctx.archive_hint or inp.recall == "off" or ctx.query_rewriter is not None:
        return None
    if query is None or leans_on_recent(query):
        return None
    if inp.recall == "auto" and is_acknowledgement(query):
        return None
    started = asyncio.ensure_future(embed_query(ctx, inp.tenant_id, query.text))
    started.add_done_callback(retrieve_late_failure)  # nobody may be waiting for it any more
    return started


async def recall_for_turn(
    ctx: ServiceContext,
    inp: TurnInput,
    asked: RewrittenQuery | None,
    snap: Snapshot,
    plan: TurnPlan,
    batch: OffloadBatch,
    *,
    extra_tokens: int = 0,
    notes_text: str | None = None,
) -> TurnRecall:
    """`asked`: the turn's query (`turn_query`); `extra_tokens`: what the prompt gained since
    the plan (new notes), kept out of B; `notes_text`: the notes the prompt will carry (what
    they say is not injected again)."""
    result = TurnRecall(mode=inp.recall)
    result.skipped_reason = recall_skip_reason(inp, asked, snap, plan)
    if result.skipped_reason or asked is None:  # what is held must still fit the recall room
        _make_room(plan.window_after, _limits(ctx, plan, extra_tokens)[2], 0, set(), result)
        return result
    recent = _recent_texts(snap, ctx.settings.recall.context_turns)
    query = with_recent(asked, recent)
    top_k, cap, room = _limits(ctx, plan, extra_tokens)
    forced = inp.recall == "force" or query.has_reference
    window_seqs = {m.seq for m in plan.window_after if m.stub_chunk_id is None}
    held = held_chunk_ids(plan.window_after)
    found = await retrieve(
        ctx,
        inp.key,
        query,
        top_k=top_k,
        budget_tokens=min(cap, room),
        gated=not forced,
        window_seqs=window_seqs,
        fresh=batch.chunks,
        exclude_ids=held,
        recent=recent,
        tiering=TurnTiering(
            injection_rules(ctx.settings.recall),
            inp.recall == "force",
            prompt_terms(plan.window_after, notes_text, plan.turn),
        ),
    )
    items = _fitted(found.items, plan.window_after, room, set(found.already_in_context), result)
    kept = {item.hit.candidate.chunk_id for item in items}
    spent = sum(item.tokens for item in items)
    pointers = _pointer_lines(ctx, found, min(cap, room) - spent, kept | held, window_seqs)
    result.query, result.fallback, result.timings_ms = found.query, found.fallback, found.timings_ms
    result.pending_chunks = found.pending_chunks
    result.hits = tuple(hit for hit in found.recalled() if hit.chunk_id in kept)
    result.need = None if found.need is None else str(found.need)
    result.repeated = len(found.repeated)
    result.pointers = tuple(found.pointer_summary((hit for hit, _ in pointers), len(kept)))
    result.pointer_tokens = sum(ctx.counter.count(line) for _, line in pointers)
    decisions = RecallDecisions(
        found.considered,
        kept,
        held,
        window_seqs,
        top_k,
        query.period,
        pointed={hit.candidate.chunk_id for hit, _ in pointers},
        repeated={hit.candidate.chunk_id for hit in found.repeated},
    )
    result.candidates = await ctx.throttle.run(
        trace_candidates, found.fused, decisions, ctx.settings.recall.trace_candidates
    )
    if items or pointers:
        block = format_block(items) if items else ""
        listed = pointers_block([line for _, line in pointers])
        result.block = "\n\n".join(part for part in (block, listed) if part)
    elif found.already_in_context or found.repeated:  # the prompt holds what it says
        result.skipped_reason = "already_in_context"
    elif found.considered or found.items:
        result.skipped_reason = "no_room_in_budget"  # hits exist: never claim there are none
    elif forced:
        result.block, result.no_match = NO_MATCH_LINE, True
    result.tokens = count_text_block(ctx.counter, recalled_block(result.block))
    return result


def injection_rules(settings: RecallSettings) -> InjectionRules:
    return InjectionRules(
        unasked_confidence=settings.auto_unasked_confidence,
        asked_confidence=settings.auto_asked_confidence,
        referenced_confidence=settings.auto_referenced_confidence,
        pointer_confidence=settings.pointer_confidence,
        max_pointers=settings.max_pointers,
        max_seen_overlap=settings.max_seen_overlap,
    )


def prompt_terms(
    window: Sequence[WindowMessage], notes_text: str | None, turn: int
) -> frozenset[str]:
    """The content terms the prompt already holds before this `turn`: its earlier window
    messages, the recalled blocks they carry, and the notes. The turn's own words are left
    out: a question names what it asks about, which its answer holds too."""
    texts = [m.message.text for m in window if m.turn != turn]
    texts += [m.recalled.text for m in window if m.recalled is not None]
    return frozenset(term_set("\n".join([*texts, notes_text or ""])))


def _pointer_lines(
    ctx: ServiceContext,
    found: Retrieval,
    room: int,
    taken: set[str],
    window_seqs: set[int],
) -> list[tuple[ScoredHit, str]]:
    """The retrieval's pointers that fit `room` tokens (the pointers' header included), best
    first: none already injected, held, or wholly in the window."""
    settings = ctx.settings.recall
    focus = focus_terms(found.query)
    used = ctx.counter.count(POINTERS_HEADER)
    lines: list[tuple[ScoredHit, str]] = []
    for hit in found.pointers:
        if hit.candidate.chunk_id in taken or in_window(hit.candidate, window_seqs):
            continue
        line = pointer_line(hit.candidate, settings.pointer_gist_tokens, ctx.counter.count, focus)
        cost = ctx.counter.count(line) + 1
        if used + cost > room:
            break
        lines.append((hit, line))
        used += cost
    return lines
