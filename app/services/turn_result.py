"""What a turn answers and what it records, both read from its `Outcome`: the `TurnResult`
the route, the metrics and replays use, and the event row (a JSON column) that lets a wrong
answer be traced afterwards to not stored, not found, not in the top k, or in the prompt."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.assemble import Prompt
from app.core.plan import Snapshot, TurnInput, TurnPlan, held_recall_tokens
from app.core.recall_trace import CandidateTrace
from app.core.results import HistoryMatch, OffloadSummary, TurnResult, TurnUsage
from app.core.tokens import calibrated
from app.core.types import JsonObject, WindowMessage
from app.services.notes import NotesUpdate
from app.services.offload import OffloadBatch
from app.services.turn_recall import TurnRecall, held_chunk_ids


@dataclass(frozen=True)
class Outcome:
    """Everything a turn decided, ready to answer and to write."""

    plan: TurnPlan
    batch: OffloadBatch
    notes: NotesUpdate
    notes_delta: int  # the new notes' tokens minus the old ones' (0 when unchanged)
    recall: TurnRecall
    window: list[WindowMessage]  # C1 after the turn, this turn's recalled block on its message

    @property
    def new_messages(self) -> list[WindowMessage]:
        """The turn's messages as they are stored (the one the block came with carries it)."""
        kept = {m.seq: m for m in self.window}
        return [kept.get(m.seq, m) for m in self.plan.new_messages]

    @property
    def estimate_without_recall(self) -> int:
        """What the watermark measures: the prompt as sent (new notes included), recalled
        text aside."""
        return self.plan.estimate_after + self.notes_delta

    @property
    def estimate_sent(self) -> int:
        """Estimated tokens of the prompt as sent: new notes and every recalled block in the
        window (this turn's too) included."""
        return self.estimate_without_recall + held_recall_tokens(self.window)

    @property
    def prompt_tokens(self) -> int:
        return calibrated(self.estimate_sent, self.plan.calibration_ratio)


def _offload_summary(outcome: Outcome) -> OffloadSummary:
    plan, drafts = outcome.plan, [f.draft for f in outcome.batch.offload]
    return OffloadSummary(
        triggered=plan.offloaded,
        chunk_ids=tuple(d.id for d in drafts),
        tokens_freed=plan.prompt_tokens_before - plan.prompt_tokens_after,
        turn_range=(min(d.turn_start for d in drafts), max(d.turn_end for d in drafts))
        if drafts
        else None,
        messages_offloaded=len(outcome.batch.chunk_of()),
        floor_yielded=plan.floor_yielded,
        oversize_chunk_ids=tuple(f.draft.id for f in outcome.batch.oversize),
        fallback=outcome.batch.fallback,
    )


def _usage(inp: TurnInput, outcome: Outcome) -> TurnUsage:
    plan = outcome.plan
    budget = plan.config.budget
    return TurnUsage(
        prompt_tokens=outcome.prompt_tokens,
        estimated_prompt_tokens=outcome.estimate_sent,
        calibration_ratio=round(plan.calibration_ratio, 4),
        context_window=budget.context_window,
        reserve_tokens=budget.reserve,
        recall_share_tokens=budget.recall_share,
        budget=budget.ceiling,
        watermark_base=budget.watermark_base,
        watermark=round(
            calibrated(outcome.estimate_without_recall, plan.calibration_ratio)
            / budget.watermark_base,
            4,
        ),
        trigger_ratio=round(plan.prompt_tokens_before / budget.watermark_base, 4),
        level=plan.level,
        observed_prompt_tokens=inp.observed_prompt_tokens,
        observed_cached_tokens=inp.observed_cached_tokens,
    )


def turn_result(
    inp: TurnInput,
    snap: Snapshot,
    outcome: Outcome,
    prompt: Prompt,
    timings: dict[str, float],
) -> TurnResult:
    return TurnResult(
        session_id=inp.session_id,
        turn=outcome.plan.turn,
        messages=prompt.messages,
        system=prompt.system,
        prompt_format=prompt.format.value,
        usage=_usage(inp, outcome),
        offload=_offload_summary(outcome),
        recall=outcome.recall.summary(outcome.window),
        notes=outcome.notes.summary(snap.notes_text, snap.notes_tokens),
        timings_ms=timings,
    )


def event_payload(outcome: Outcome, result: TurnResult) -> JsonObject:
    """The turn's event row (a JSON column): what it decided and measured, ids and numbers
    only, besides the queries (scrubbed by a forget)."""
    offload, recall, notes = result.offload, result.recall, result.notes
    policy = outcome.plan.config.policy
    recall_ids = [hit.chunk_id for hit in recall.hits]
    return {
        "level": result.usage.level.value,
        "trigger_ratio": result.usage.trigger_ratio,
        "watermark": result.usage.watermark,
        "prompt_tokens": result.usage.prompt_tokens,
        "context_window": result.usage.context_window,
        "budget": result.usage.budget,
        "watermark_base": result.usage.watermark_base,
        "offload_ratio": policy.offload_ratio,
        "emergency_ratio": policy.emergency_ratio,
        "observed_prompt_tokens": result.usage.observed_prompt_tokens,
        "observed_cached_tokens": result.usage.observed_cached_tokens,
        "messages_added": len(outcome.plan.new_messages),
        "offload": {
            "triggered": offload.triggered,
            "tokens_freed": offload.tokens_freed,
            "chunks_offloaded": len(offload.chunk_ids),
            "chunk_ids": list(offload.chunk_ids),
            "turn_range": list(offload.turn_range) if offload.turn_range else None,
            "floor_yielded": offload.floor_yielded,
        },
        "oversize_chunk_ids": list(offload.oversize_chunk_ids),
        "recall": {
            "query_raw": recall.query_raw,
            "query_rewritten": recall.query_rewritten,
            "recall_ids": recall_ids,
            "rerank_scores": [hit.score for hit in recall.hits],
            "final_k": recall.final_k,
            "injected_tokens": recall.injected_tokens,
            "no_match": recall.no_match,
            "held_tokens": recall.held_tokens,
            "cleared_held": recall.cleared_held,
            "pending_chunks": recall.pending_chunks,
            "need": recall.need,
            "pointer_ids": [hit.chunk_id for hit in recall.pointers],
            "pointer_tokens": recall.pointer_tokens,
            "repeated": recall.repeated,
            "skipped_reason": recall.skipped_reason,
            "fallback": recall.fallback,
            "held_ids": sorted(held_chunk_ids(outcome.window) - set(recall_ids)),
            "candidates": [_candidate(c) for c in outcome.recall.candidates],
        },
        "notes": {
            "updated": notes.updated,
            "source": notes.source,
            "rejected_constraints": list(notes.rejected_constraints),
            "missing_constraints": list(notes.missing_constraints),
            "error": notes.error,
            "needs_rebuild": notes.needs_rebuild,
        },
        "facts": {
            "added": len(outcome.notes.changes.new),
            "proposed_kept": len(outcome.notes.proposals.kept),
            "proposed_dropped": len(outcome.notes.proposals.dropped),
            "superseded": [old for old, _ in outcome.notes.changes.superseded],
            "resolved": outcome.notes.changes.resolved,
            "expired": outcome.notes.changes.expired,
        },
        "fallback_flag": offload.fallback or recall.fallback,
        "timings_ms": dict(result.timings_ms),
        "history": _history(result.history),
    }


def _candidate(trace: CandidateTrace) -> JsonObject:
    return {
        "chunk_id": trace.chunk_id,
        "turn_range": list(trace.turn_range),
        "vector_score": trace.vector_score,
        "similarity": trace.similarity,
        "lexical_score": trace.lexical_score,
        "fused_score": trace.fused_score,
        "margin": trace.margin,
        "confidence": trace.confidence,
        "outcome": trace.outcome.value,
    }


def _history(history: HistoryMatch | None) -> JsonObject | None:
    if history is None:
        return None
    return {
        "matched": history.matched,
        "added": history.added,
        "archived_from_seq": history.archived_from_seq,
        "archived_messages": history.archived_messages,
    }
