"""What the session inspector shows (docs/DESIGN.md §9), as typed values, and how a turn's
event row (a JSON column) reads back into them.

Events written before a field existed read with that field's neutral value (no budget: the
session's current one; no candidates: none), so old sessions still draw.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.core.recall_trace import (
    CandidateOutcome,
    CandidateTrace,
    DetailClass,
    DetailPlace,
    TurnRecallTrace,
)
from app.core.results import SessionStatus, TurnRange


@dataclass(frozen=True)
class SessionSummary:
    """One line of the caller's session list."""

    session_id: str
    turns: int
    model: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class OffloadMark:
    tokens_freed: int
    chunk_ids: tuple[str, ...]
    turn_range: TurnRange | None
    floor_yielded: bool


@dataclass(frozen=True)
class TimelinePoint:
    """One turn on the prompt-tokens chart."""

    turn: int
    at: datetime
    prompt_tokens: int
    injected_tokens: int
    budget: int  # C − r
    watermark_base: int  # C − r − R: the offload and emergency lines are shares of it
    offload_ratio: float
    emergency_ratio: float
    level: str
    offload: OffloadMark | None


@dataclass(frozen=True)
class TurnRecallDetail:
    """What one turn's recall asked, found and did, read from its event."""

    turn: int
    at: datetime
    query_raw: str | None
    query_rewritten: str | None
    skipped_reason: str | None
    fallback: str | None
    no_match: bool
    injected_ids: tuple[str, ...]
    held_ids: tuple[str, ...]
    injected_tokens: int
    pending_chunks: int
    candidates: tuple[CandidateTrace, ...]

    def as_trace(self) -> TurnRecallTrace:
        return TurnRecallTrace(
            turn=self.turn,
            at=self.at,
            candidates=self.candidates,
            injected=frozenset(self.injected_ids),
            held=frozenset(self.held_ids),
            skipped_reason=self.skipped_reason,
        )


@dataclass(frozen=True)
class FactRecord:
    """A fact with its whole history: active, superseded (by which), resolved or expired."""

    id: int
    kind: str
    text: str
    source_turn: int
    source_seq: int | None
    role: str
    status: str
    superseded_by: int | None
    resolved_at_turn: int | None


@dataclass(frozen=True)
class ArchivedChunk:
    """A chunk as the archive lists it, without its text."""

    chunk_id: str
    kind: str
    turn_range: TurnRange
    tokens: int
    embedded: bool  # its vectors are written (else it waits in the embedding queue)
    embedding_model: str | None
    summary_hint: str
    superseded_turn: int | None
    created_at: datetime


@dataclass(frozen=True)
class ArchivePage:
    chunks: tuple[ArchivedChunk, ...]  # newest first
    total: int
    offset: int
    limit: int

    @property
    def pages(self) -> int:
        return -(-self.total // self.limit)  # ceiling division


@dataclass(frozen=True)
class SessionInspection:
    status: SessionStatus  # as `GET /sessions/{id}/status` answers it
    facts: tuple[FactRecord, ...]  # every fact, whatever its status
    timeline: tuple[TimelinePoint, ...]  # oldest first; the newest turns only, when long
    timeline_truncated: bool
    archive: ArchivePage
    turn: TurnRecallDetail | None  # the turn asked about, else the newest
    notes_absence: str | None = None  # why the session has no notes yet (None: it has some)


@dataclass(frozen=True)
class DetailTrace:
    """Where a piece of text was at a turn: one of the four failure classes, and each place
    that holds it now."""

    turn: int
    verdict: DetailClass
    places: tuple[DetailPlace, ...]
    chunks_searched: int
    searched_all: bool  # False: the archive is larger than the inspector searches


def notes_absence(has_notes: bool, spoken: int, messages: int) -> str | None:
    """Why a session has no notes, for the inspector: the notes read what the user and the
    assistant say (not tool results), and render from the first turn that states something
    they keep."""
    if has_notes:
        return None
    if messages == 0:
        return "No notes yet: the session has no messages."
    unread = messages - spoken
    return (
        f"No notes yet: none of the {spoken} messages from the user or the assistant states a "
        "goal, a task, a constraint, a decision or a fact the notes keep"
        + (f"; the other {unread} (tool results) the notes do not read." if unread else ".")
    )


# --- reading a turn's event -------------------------------------------------------------------


def _int(payload: dict[str, Any], key: str, default: int = 0) -> int:
    value = payload.get(key)
    return int(value) if isinstance(value, int | float) else default


def _float(payload: dict[str, Any], key: str, default: float) -> float:
    value = payload.get(key)
    return float(value) if isinstance(value, int | float) else default


def _section(payload: dict[str, Any], key: str) -> dict[str, Any]:
    value = payload.get(key)
    return value if isinstance(value, dict) else {}


def _ids(value: Any) -> tuple[str, ...]:
    return tuple(str(item) for item in value) if isinstance(value, list) else ()


@dataclass(frozen=True)
class Lines:
    """The budget, the watermark base and ratios to assume for events that did not record
    them."""

    budget: int
    watermark_base: int
    offload_ratio: float
    emergency_ratio: float


def timeline_point(turn: int, at: datetime, payload: dict[str, Any], lines: Lines) -> TimelinePoint:
    offload = _section(payload, "offload")
    recall = _section(payload, "recall")
    mark = None
    if offload.get("triggered"):
        turn_range = offload.get("turn_range")
        mark = OffloadMark(
            tokens_freed=_int(offload, "tokens_freed"),
            chunk_ids=_ids(offload.get("chunk_ids")),
            turn_range=(turn_range[0], turn_range[1]) if isinstance(turn_range, list) else None,
            floor_yielded=bool(offload.get("floor_yielded")),
        )
    return TimelinePoint(
        turn=turn,
        at=at,
        prompt_tokens=_int(payload, "prompt_tokens"),
        injected_tokens=_int(recall, "injected_tokens"),
        budget=_int(payload, "budget", lines.budget)
        if "watermark_base" in payload
        else lines.budget,
        # Events from before the base had its own name recorded it as their "budget".
        watermark_base=_int(
            payload, "watermark_base", _int(payload, "budget", lines.watermark_base)
        ),
        offload_ratio=_float(payload, "offload_ratio", lines.offload_ratio),
        emergency_ratio=_float(payload, "emergency_ratio", lines.emergency_ratio),
        level=str(payload.get("level", "normal")),
        offload=mark,
    )


def _candidate(item: dict[str, Any]) -> CandidateTrace | None:
    try:
        turn_range = item["turn_range"]
        return CandidateTrace(
            chunk_id=str(item["chunk_id"]),
            turn_range=(int(turn_range[0]), int(turn_range[1])),
            vector_score=item.get("vector_score"),
            similarity=item.get("similarity"),
            lexical_score=item.get("lexical_score"),
            fused_score=float(item["fused_score"]),
            margin=float(item["margin"]),
            outcome=CandidateOutcome(item["outcome"]),
            confidence=float(item.get("confidence", 0.0)),
        )
    except (KeyError, TypeError, ValueError, IndexError):
        return None  # not an entry this version wrote


def recall_detail(turn: int, at: datetime, payload: dict[str, Any]) -> TurnRecallDetail:
    recall = _section(payload, "recall")
    raw = recall.get("candidates")
    entries = [c for c in raw if isinstance(c, dict)] if isinstance(raw, list) else []
    return TurnRecallDetail(
        turn=turn,
        at=at,
        query_raw=recall.get("query_raw"),
        query_rewritten=recall.get("query_rewritten"),
        skipped_reason=recall.get("skipped_reason"),
        fallback=recall.get("fallback", payload.get("fallback_flag")),
        no_match=bool(recall.get("no_match")),
        injected_ids=_ids(recall.get("recall_ids")),
        held_ids=_ids(recall.get("held_ids")),
        injected_tokens=_int(recall, "injected_tokens"),
        pending_chunks=_int(recall, "pending_chunks"),
        candidates=tuple(c for c in map(_candidate, entries) if c is not None),
    )
