"""What a turn recalls (docs/DESIGN.md §4, modes): skip rules, k and B for the level, the block.

- `off`: nothing. No user message in the turn (tool results only): nothing.
- C3 empty (nothing archived before or by this turn): nothing, and no embedding call at all.
- `auto`: every turn once C3 exists, gated by a minimum similarity; a reference word
  ("刚才", "we agreed on") lifts the gate. `force`: never gated.
- A reference question or `force` with no hit injects the explicit no-match line (but not
  when hits exist and the budget has no room for them).
- k and B tighten in emergency, and B never lets the prompt pass the emergency line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.core.assemble import recalled_block
from app.core.budget import Level
from app.core.plan import Snapshot, TurnInput, TurnPlan
from app.core.rerank import NO_MATCH_LINE, format_block
from app.core.results import RecalledChunk, RecallMode, TurnRecallSummary
from app.core.rewrite import RewrittenQuery, rewrite
from app.core.tokens import count_text_block
from app.core.types import Message
from app.services.context import ServiceContext
from app.services.offload import OffloadBatch
from app.services.recall import retrieve


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
    timings_ms: dict[str, float] = field(default_factory=dict)

    def summary(self) -> TurnRecallSummary:
        return TurnRecallSummary(
            mode=self.mode,
            query_raw=self.query.raw if self.query else None,
            query_rewritten=self.query.text if self.query else None,
            hits=self.hits,
            injected_tokens=self.tokens,
            no_match=self.no_match,
            skipped_reason=self.skipped_reason,
            fallback=self.fallback,
        )


def _newest_user_message(inp: TurnInput) -> Message | None:
    for message in reversed(inp.messages):
        if message.role == "user" and message.content:
            return message
    return None


def _recent_texts(snap: Snapshot, context_turns: int) -> list[str]:
    if context_turns == 0:
        return []
    turns = sorted({m.turn for m in snap.window})[-context_turns:]
    return [m.message.content for m in snap.window if m.turn in turns and m.message.content]


def _limits(ctx: ServiceContext, plan: TurnPlan, extra_tokens: int) -> tuple[int, int]:
    settings = ctx.settings.recall
    emergency = plan.level is Level.EMERGENCY
    top_k = settings.emergency_top_k if emergency else settings.top_k
    budget = settings.emergency_budget_tokens if emergency else settings.budget_tokens
    budget_now = plan.config.budget
    # Recalled text may use the room kept for it on top of the lines (`Budget.recall_reserve`).
    emergency_line = budget_now.line(plan.config.policy.emergency_ratio) + budget_now.recall_reserve
    # The block's header and the blank lines between items are not part of any item.
    overhead = count_text_block(ctx.counter, recalled_block("-")) + 2 * top_k
    prompt = plan.prompt_tokens_after + round(extra_tokens * plan.calibration_ratio)
    headroom = (emergency_line - prompt) / plan.calibration_ratio - overhead
    return top_k, max(0, min(budget, int(headroom)))


async def recall_for_turn(
    ctx: ServiceContext,
    inp: TurnInput,
    snap: Snapshot,
    plan: TurnPlan,
    batch: OffloadBatch,
    *,
    extra_tokens: int = 0,
) -> TurnRecall:
    """`extra_tokens`: what the prompt gained since the plan (new notes), kept out of B."""
    result = TurnRecall(mode=inp.recall)
    asked = _newest_user_message(inp)
    if inp.recall == "off":
        result.skipped_reason = "off"
    elif asked is None or asked.content is None:
        result.skipped_reason = "no_user_input"
    elif not (snap.has_chunks or batch.chunks):
        result.skipped_reason = "archive_empty"
    if result.skipped_reason:
        return result
    assert asked is not None and asked.content is not None
    recent = _recent_texts(snap, ctx.settings.recall.context_turns)
    query = rewrite(
        asked.content[: ctx.settings.recall.max_query_chars],
        recent,
        asked_at=asked.created_at or ctx.clock(),
    )
    top_k, budget = _limits(ctx, plan, extra_tokens)
    forced = inp.recall == "force" or query.has_reference
    found = await retrieve(
        ctx,
        inp.key,
        query,
        top_k=top_k,
        budget_tokens=budget,
        gated=not forced,
        window_seqs={m.seq for m in plan.window_after if m.stub_chunk_id is None},
        fresh=batch.chunks,
        recent=recent,
    )
    result.query = found.query
    result.hits, result.fallback, result.timings_ms = (
        found.recalled(),
        found.fallback,
        found.timings_ms,
    )
    if found.items:
        result.block = format_block(found.items)
    elif found.considered:
        result.skipped_reason = "no_room_in_budget"  # hits exist: never claim there are none
    elif forced:
        result.block, result.no_match = NO_MATCH_LINE, True
    result.tokens = count_text_block(ctx.counter, recalled_block(result.block))
    return result
