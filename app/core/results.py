"""What each use case decides, as typed values: the route renders them, the event row and the
metrics read them, and the memory tool writes them as text for the model.

They hold values, not wire formats: times are datetimes and ranges are tuples; the HTTP
schemas (app/api/schemas.py) decide how they look on the wire. Field names match the JSON
the API answers, so a field found here is the field a client reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from app.core.budget import Level, Policy
from app.core.facts import FactKind
from app.core.types import JsonObject

RecallMode = Literal["auto", "off", "force"]
NotesSource = Literal["extractive", "llm"]
TurnRange = tuple[int, int]


# --- a turn ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnUsage:
    prompt_tokens: int
    estimated_prompt_tokens: int
    calibration_ratio: float
    context_window: int
    reserve_tokens: int
    recall_share_tokens: int  # R: recalled text never takes more (part of the budget)
    budget: int  # C − r: no prompt passes it, recalled text included
    watermark_base: int  # C − r − R: what the watermark lines are shares of
    watermark: float  # the prompt without recalled text / watermark_base, after the offload
    trigger_ratio: float  # the prompt before any offload / watermark_base
    level: Level
    # What the client reported of the previous prompt: the provider's count, and how much of it
    # the provider's prompt cache served (None: not reported).
    observed_prompt_tokens: int | None = None
    observed_cached_tokens: int | None = None


@dataclass(frozen=True)
class OffloadSummary:
    triggered: bool
    chunk_ids: tuple[str, ...]
    tokens_freed: int
    turn_range: TurnRange | None
    messages_offloaded: int
    floor_yielded: bool
    oversize_chunk_ids: tuple[str, ...]
    fallback: str | None


@dataclass(frozen=True)
class RecalledChunk:
    """One chunk recall put in the prompt (or answered), with the scores that chose it."""

    chunk_id: str
    score: float
    confidence: float  # in [0, 1]: how likely it holds what was asked (core.confidence)
    vector_score: float | None
    lexical_score: float | None
    turn_range: TurnRange
    ts: datetime
    tokens: int
    truncated: bool
    # Defaults: answers stored for replays before hits were ranked.
    rank: int = 0  # 1-based, best first among the query's candidates
    margin: float = 0.0  # what it says scores above the query's median candidate (core.rerank)
    lead: float = 0.0  # … and above the next candidate's


@dataclass(frozen=True, kw_only=True)
class RecalledText(RecalledChunk):
    text: str  # the raw chunk text, cut to the per-item cap


@dataclass(frozen=True)
class TurnRecallSummary:
    mode: RecallMode
    query_raw: str | None
    query_rewritten: str | None
    hits: tuple[RecalledChunk, ...]  # injected, in time order (the block's), each with its rank
    injected_tokens: int
    no_match: bool  # the explicit no-match line was injected
    skipped_reason: str | None
    fallback: str | None
    # Blocks of earlier turns still in the prompt, and whether they gave way to this one.
    # Defaults: answers stored for replays before blocks were kept.
    held_tokens: int = 0
    cleared_held: bool = False
    # Chunks the search found with no vectors yet (in the embedding queue): words only.
    pending_chunks: int = 0
    # What the turn asked of the past ("unasked", "asked", "referenced"; None: not judged),
    # the one-line pointers of its block (best first) and their tokens, and the hits left
    # out as near-duplicates of the prompt (core.injection).
    need: str | None = None
    pointers: tuple[RecalledChunk, ...] = ()
    pointer_tokens: int = 0
    repeated: int = 0

    @property
    def final_k(self) -> int:
        return len(self.hits)


@dataclass(frozen=True)
class ActiveFact:
    id: int | None  # None for a fact first written by this very turn
    kind: FactKind
    text: str
    source_turn: int
    source_seq: int | None
    role: str
    subject: str | None = None
    value: str | None = None
    carried_from: str | None = None  # the session it was carried from (`carry_facts`)
    carried_fact_id: int | None = None  # its id there


@dataclass(frozen=True)
class NotesSummary:
    text: str | None  # the scratchpad block in the prompt (C2)
    tokens: int
    updated: bool  # rendered again this turn (an offload or a rebuild)
    source: NotesSource | None
    rejected_constraints: tuple[str, ...]  # dropped or weakened by the chat model
    missing_constraints: tuple[str, ...]  # left out by the token cap (still in the facts)
    error: str | None
    needs_rebuild: bool
    facts: tuple[ActiveFact, ...]
    proposed_kept: int = 0  # facts the chat model proposed that their message says
    proposed_dropped: int = 0  # … and those it does not (never written)


@dataclass(frozen=True)
class HistoryMatch:
    """How a client's whole history met the stored transcript (app/core/transcript.py):
    messages recognised, messages new, and the first seq archived as superseded, if any."""

    matched: int
    added: int
    archived_from_seq: int | None = None
    archived_messages: int = 0


@dataclass(frozen=True)
class TurnResult:
    session_id: str
    turn: int
    messages: list[JsonObject]  # the prompt to send, in `prompt_format`
    usage: TurnUsage
    offload: OffloadSummary
    recall: TurnRecallSummary
    notes: NotesSummary
    timings_ms: Mapping[str, float]
    # Defaults: answers stored for replays before prompt formats existed were OpenAI prompts.
    prompt_format: str = "openai"
    system: list[JsonObject] | None = None  # Anthropic's top-level system blocks
    history: HistoryMatch | None = None  # a whole-history (proxy) turn's reconciliation


# --- recall, status, chunks, events ------------------------------------------------------------


@dataclass(frozen=True)
class RecallResult:
    query: str
    query_rewritten: str
    results: tuple[RecalledText, ...]  # best first; empty means no match
    message: str | None  # "no match …" when nothing was found
    already_in_context: tuple[str, ...]  # matching chunks the latest turn already injected
    fallback: str | None
    timings_ms: Mapping[str, float]
    pending_chunks: int = 0  # of the session, searched by their words only (not embedded yet)

    @property
    def no_match(self) -> bool:
        return not self.results


@dataclass(frozen=True)
class WatermarkLevels:
    offload_at: int
    emergency_at: int
    target: int


@dataclass(frozen=True)
class WatermarkView:
    """Window, budget, prompt size and levels of a session, as its last turn left them."""

    context_window: int
    reserve_tokens: int
    recall_share_tokens: int
    budget: int  # C − r
    watermark_base: int  # C − r − R
    prompt_tokens: int
    watermark: float
    level: Level
    levels: WatermarkLevels
    policy: Policy
    calibration_ratio: float


@dataclass(frozen=True)
class SessionCounts:
    window_messages: int = 0
    window_tokens: int = 0
    offloaded_messages: int = 0
    chunks: int = 0
    superseded_messages: int = 0  # archived by a client's diverging history (proxy mode)


@dataclass(frozen=True)
class NotesState:
    text: str | None
    tokens: int
    needs_rebuild: bool


@dataclass(frozen=True)
class LastOffload:
    turn: int | None
    triggered: bool
    tokens_freed: int
    chunks_offloaded: int
    chunk_ids: tuple[str, ...]
    turn_range: TurnRange | None
    floor_yielded: bool
    at: datetime


@dataclass(frozen=True)
class SessionStatus:
    session_id: str
    turns: int
    model: str | None
    window: WatermarkView | None  # None while no window is known for the session's model
    counts: SessionCounts
    notes: NotesState | None
    facts: tuple[ActiveFact, ...]
    last_offload: LastOffload | None


@dataclass(frozen=True)
class StoredChunk:
    chunk_id: str
    session_id: str
    kind: str
    turn_range: TurnRange
    roles: tuple[str, ...]
    first_ts: datetime
    last_ts: datetime
    tokens: int
    summary_hint: str
    embedding_model: str | None
    needs_embedding: bool
    content_hash: str
    raw_text: str
    # The messages as posted (`seq`, `format`, `posted`), payloads as blob references.
    messages: tuple[JsonObject, ...] = ()
    superseded_turn: int | None = None  # archived by a diverging history at that turn


@dataclass(frozen=True)
class StoredBlob:
    """An offloaded image, clip or file: its bytes and what they are."""

    media_type: str | None
    kind: str
    data: bytes


@dataclass(frozen=True)
class SessionEvent:
    id: int
    turn: int | None
    kind: str
    created_at: datetime
    payload: JsonObject  # the event row's JSON column, as written


@dataclass(frozen=True)
class EventPage:
    events: tuple[SessionEvent, ...]
    next_after: int | None  # pass as `after` for the next page; None: no more now


# --- the memory tool's writes ------------------------------------------------------------------


@dataclass(frozen=True)
class RememberResult:
    chunk_id: str
    duplicate: bool  # already stored: nothing was written
    facts: tuple[FactKind, ...] = ()  # kinds of the facts stored with it


@dataclass(frozen=True)
class FactsCarried:
    """What a `carry` call brought into a session: the source session's fact ids carried now
    (with their texts) and those carried by an earlier call or turn (nothing written twice)."""

    from_session: str
    carried: tuple[int, ...]
    texts: tuple[str, ...]
    already_carried: tuple[int, ...] = ()


@dataclass(frozen=True)
class OffloadScheduled:
    scheduled: bool
    until_tokens: int | None
    prompt_tokens: int
    applies: str = "at the session's next turn"


@dataclass(frozen=True)
class ForgetPreview:
    chunk_id: str
    kind: str
    turn_range: TurnRange
    tokens: int
    summary_hint: str


@dataclass(frozen=True)
class ForgetPending:
    pending_id: str
    expires_at: datetime
    preview: tuple[ForgetPreview, ...]
    status: Literal["pending"] = "pending"
    note: str = "Nothing is deleted yet. A person holding the memory:forget scope confirms."

    @property
    def confirm_with(self) -> dict[str, str]:
        """The call that carries the request out."""
        return {"type": "forget", "confirm": self.pending_id}


@dataclass(frozen=True)
class ForgetDone:
    chunks_deleted: int
    request_id: str
    chunk_ids: tuple[str, ...]
    turn_ranges: tuple[TurnRange, ...]
    tokens: int
    facts_deleted: int
    requested_by: str
    confirmed_by: str
    status: Literal["deleted"] = "deleted"
