"""Why each recall candidate was, or was not, put in the prompt; and where a detail was at a
given turn (docs/DESIGN.md §9).

A turn records its best candidates with their vector, lexical and fused scores and one
outcome each (`trace_candidates`), so that a developer asking "why did the agent forget?"
can tell the four failure classes apart afterwards (`locate`):

- **not stored**: no stored text holds the detail (it was never said, or said in other words);
- **not found**: a chunk holds it, but the search did not bring that chunk up;
- **found, not in the top k**: a candidate that was not evidence, not within k, or had no room;
- **in the prompt**: in the window at that turn, or in a recalled block (this turn's or held).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from app.core.dates import Period
from app.core.pace import pace
from app.core.rerank import ScoredHit, in_window, said_on_the_day


class CandidateOutcome(StrEnum):
    INJECTED = "injected"  # in this turn's block
    POINTED = "pointed"  # in this turn's block as a one-line pointer (core.injection)
    REPEATED = "repeated"  # the prompt already holds its content terms (core.injection)
    HELD = "held"  # a block the window holds already quotes it
    IN_WINDOW = "in_window"  # its messages are still in the window
    NOT_EVIDENCE = "not_evidence"  # below the evidence floors (or judged out by a reranker)
    OFF_THE_DAY = "off_the_day"  # the question names a day it was not said on
    BEYOND_TOP_K = "beyond_top_k"  # evidence, but k better items came first
    NO_ROOM = "no_room"  # evidence within k, but the recall budget had no room for it


@dataclass(frozen=True)
class CandidateTrace:
    chunk_id: str
    turn_range: tuple[int, int]
    vector_score: float | None  # best unit's inner product with the shifted query (+ context)
    similarity: float | None  # that unit's plain cosine with the query
    lexical_score: float | None  # IDF-weighted share of the query's terms present
    fused_score: float  # what ranked it (lifts for a named day or speaker included)
    margin: float  # its lead over the query's median candidate
    outcome: CandidateOutcome
    confidence: float = 0.0  # what evidence is judged by (core.confidence); 0: traced before


@dataclass(frozen=True)
class RecallDecisions:
    """What one search decided, beyond its candidates' scores."""

    evidence: Sequence[ScoredHit]  # in the final order (a reranker's, when one ran)
    injected: Collection[str]
    held: Collection[str]  # chunks a block already in the window quotes
    window_seqs: Collection[int]
    top_k: int
    period: Period | None = None
    pointed: Collection[str] = ()
    repeated: Collection[str] = ()


def trace_candidates(
    fused: Sequence[ScoredHit], decisions: RecallDecisions, limit: int
) -> tuple[CandidateTrace, ...]:
    """The best `limit` candidates by fused score (and every injected one), each with the
    reason it was or was not injected."""
    outcomes = _outcomes(fused, decisions)
    kept = [
        hit
        for rank, hit in enumerate(fused)
        if rank < limit or hit.candidate.chunk_id in decisions.injected
    ]
    return tuple(_trace(hit, outcomes[hit.candidate.chunk_id]) for hit in kept)


def _outcomes(fused: Sequence[ScoredHit], d: RecallDecisions) -> dict[str, CandidateOutcome]:
    eligible_rank: dict[str, int] = {}
    for hit in d.evidence:
        chunk_id = hit.candidate.chunk_id
        if chunk_id not in d.held and not in_window(hit.candidate, d.window_seqs):
            eligible_rank.setdefault(chunk_id, len(eligible_rank))
    evidence = {hit.candidate.chunk_id for hit in d.evidence}
    # Off the day only when the named day had candidates: otherwise the rest were judged.
    day = d.period if said_on_the_day(fused, d.period) is not None else None
    outcomes = {}
    for hit in fused:
        pace()
        chunk_id = hit.candidate.chunk_id
        if chunk_id in d.injected:
            outcome = CandidateOutcome.INJECTED
        elif chunk_id in d.pointed:
            outcome = CandidateOutcome.POINTED
        elif chunk_id in d.repeated:
            outcome = CandidateOutcome.REPEATED
        elif chunk_id in d.held:
            outcome = CandidateOutcome.HELD
        elif chunk_id not in evidence:
            off_day = day is not None and not hit.candidate.said_within(day)
            outcome = CandidateOutcome.OFF_THE_DAY if off_day else CandidateOutcome.NOT_EVIDENCE
        elif chunk_id not in eligible_rank:
            outcome = CandidateOutcome.IN_WINDOW
        elif eligible_rank[chunk_id] < d.top_k:
            outcome = CandidateOutcome.NO_ROOM
        else:
            outcome = CandidateOutcome.BEYOND_TOP_K
        outcomes[chunk_id] = outcome
    return outcomes


def _trace(hit: ScoredHit, outcome: CandidateOutcome) -> CandidateTrace:
    candidate = hit.candidate
    return CandidateTrace(
        chunk_id=candidate.chunk_id,
        turn_range=(candidate.turn_start, candidate.turn_end),
        vector_score=_rounded(candidate.vector_score),
        similarity=_rounded(candidate.similarity),
        lexical_score=_rounded(candidate.lexical_score),
        fused_score=round(hit.score, 6),
        margin=round(hit.margin, 6),
        outcome=outcome,
        confidence=round(hit.confidence, 4),
    )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


# --- where a detail was at a turn --------------------------------------------------------------


class DetailClass(StrEnum):
    """The four failure classes, from worst to best."""

    NOT_STORED = "not_stored"
    NOT_FOUND = "not_found"
    NOT_IN_TOP_K = "found_not_in_top_k"
    IN_PROMPT = "in_prompt"


@dataclass(frozen=True)
class StoredChunkAt:
    """A chunk holding the detail, and when it reached the archive: `archived_turn`, the
    first turn that had it there (its offloading turn; for a remembered point, the turn
    after); else, for chunks written before that was recorded, its write time (an offload's
    chunks are written in the transaction of the turn's event)."""

    chunk_id: str
    turn_range: tuple[int, int]
    created_at: datetime
    archived_turn: int | None = None
    from_window: bool = True  # offloaded messages (not a remembered point)

    def archived_by(self, turn: TurnRecallTrace) -> bool:
        if self.archived_turn is not None:
            return self.archived_turn <= turn.turn
        return self.created_at <= turn.at


@dataclass(frozen=True)
class TurnRecallTrace:
    """What one turn's event says of its recall."""

    turn: int
    at: datetime  # the event's time: chunks written up to then were in the archive
    candidates: Sequence[CandidateTrace]
    injected: Collection[str]
    held: Collection[str]
    skipped_reason: str | None = None  # why recall did not search, or found nothing to inject


@dataclass(frozen=True)
class DetailPlace:
    """One place the detail is stored, and what that place was at the turn."""

    where: str  # "window" (message seq) or "chunk"
    ref: str  # the message's seq, or the chunk id
    verdict: DetailClass
    reason: str


def locate(
    window_turns: Sequence[tuple[int, int]],
    chunks: Sequence[StoredChunkAt],
    turn: TurnRecallTrace,
) -> tuple[DetailClass, tuple[DetailPlace, ...]]:
    """The detail's class at `turn`, the best over every place that holds it, and each place.
    `window_turns`: (seq, turn) of the window messages that hold it now (a message only ever
    leaves the window, so one said by `turn` was in it then)."""
    places = [
        DetailPlace("window", str(seq), DetailClass.IN_PROMPT, "in the window")
        for seq, said in window_turns
        if said <= turn.turn
    ]
    places += [
        _chunk_place(chunk, turn)
        for chunk in chunks
        if chunk.turn_range[0] <= turn.turn and (chunk.from_window or chunk.archived_by(turn))
    ]
    if not places:
        return DetailClass.NOT_STORED, ()
    order = list(DetailClass)
    best = max(places, key=lambda place: order.index(place.verdict))
    return best.verdict, tuple(places)


def _chunk_place(chunk: StoredChunkAt, turn: TurnRecallTrace) -> DetailPlace:
    place = "chunk"
    if not chunk.archived_by(turn):
        return DetailPlace(place, chunk.chunk_id, DetailClass.IN_PROMPT, "in the window then")
    if chunk.chunk_id in turn.injected:
        return DetailPlace(place, chunk.chunk_id, DetailClass.IN_PROMPT, "recalled this turn")
    if chunk.chunk_id in turn.held:
        return DetailPlace(place, chunk.chunk_id, DetailClass.IN_PROMPT, "in a held block")
    for candidate in turn.candidates:
        if candidate.chunk_id == chunk.chunk_id and candidate.outcome is CandidateOutcome.REPEATED:
            # left out because the prompt already held what it says (the notes, the window
            # or a held block): the detail reached the model
            return DetailPlace(
                place, chunk.chunk_id, DetailClass.IN_PROMPT, "already in the prompt"
            )
        if candidate.chunk_id == chunk.chunk_id:
            reason = candidate.outcome.value
            return DetailPlace(place, chunk.chunk_id, DetailClass.NOT_IN_TOP_K, reason)
    reason = "not among the candidates"
    if turn.skipped_reason:
        reason += f" (recall: {turn.skipped_reason})"
    return DetailPlace(place, chunk.chunk_id, DetailClass.NOT_FOUND, reason)
