"""The answers of Ebbtide's HTTP API, typed as `openapi/openapi.json` describes them
(tests/unit/test_client_contract.py checks each model against its schema component). Fields a
newer server adds are kept (`extra="allow"`), so an older client keeps working."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

JsonObject = dict[str, Any]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class Usage(_Answer):
    prompt_tokens: int
    estimated_prompt_tokens: int
    calibration_ratio: float
    context_window: int
    reserve_tokens: int
    recall_share_tokens: int
    budget: int
    watermark_base: int
    watermark: float
    trigger_ratio: float
    level: Literal["normal", "offload", "emergency"]
    observed_prompt_tokens: int | None
    observed_cached_tokens: int | None


class OffloadReport(_Answer):
    triggered: bool
    chunk_ids: list[str]
    tokens_freed: int
    turn_range: list[int] | None
    messages_offloaded: int
    floor_yielded: bool
    oversize_chunk_ids: list[str]
    fallback: str | None


class RecallHit(_Answer):
    chunk_id: str
    rank: int  # 1: the query's best hit
    score: float
    confidence: float  # in [0, 1]: how likely the hit holds what was asked
    margin: float
    lead: float
    vector_score: float | None
    lexical_score: float | None
    turn_range: list[int]
    ts: str
    tokens: int
    truncated: bool


class RecallReport(_Answer):
    mode: str
    query_raw: str | None
    query_rewritten: str | None
    hits: list[RecallHit]
    final_k: int
    injected_tokens: int
    no_match: bool
    skipped_reason: str | None
    fallback: str | None
    held_tokens: int
    cleared_held: bool
    pending_chunks: int = 0
    need: str | None = None  # "unasked", "asked", "referenced"
    pointers: list[RecallHit] = []  # given as one-line pointers, counted apart from hits
    pointer_tokens: int = 0
    repeated: int = 0  # hits left out: the prompt already holds what they say


class Fact(_Answer):
    id: int | None
    kind: str
    text: str
    source_turn: int
    source_seq: int | None
    role: str
    subject: str | None = None  # a stated fact's: "pilot budget"
    value: str | None = None  # normalised: "48500 EUR", "2027-03-14"
    carried_from: str | None = None  # the session it was carried from (`carry_facts`)
    carried_fact_id: int | None = None


class NotesView(_Answer):
    text: str | None
    tokens: int
    updated: bool
    source: str | None
    rejected_constraints: list[str]
    missing_constraints: list[str]
    error: str | None
    needs_rebuild: bool
    facts: list[Fact]


class TurnResult(_Answer):
    """The prompt to send (`messages`, and `system` blocks for Anthropic), and what the turn
    did to get there."""

    session_id: str
    turn: int
    prompt_format: str
    system: list[JsonObject] | None
    messages: list[JsonObject]
    usage: Usage
    offload: OffloadReport
    recall: RecallReport
    notes: NotesView
    timings_ms: dict[str, float]


class Recalled(RecallHit):
    text: str


class RecallAnswer(_Answer):
    query: str
    query_rewritten: str
    results: list[Recalled]
    no_match: bool
    message: str | None
    fallback: str | None
    timings_ms: dict[str, float]
    pending_chunks: int = 0


class Remembered(_Answer):
    chunk_id: str
    duplicate: bool
    facts: list[str]


class Counts(_Answer):
    window_messages: int
    window_tokens: int
    offloaded_messages: int
    chunks: int
    superseded_messages: int


class Status(_Answer):
    session_id: str
    turns: int
    model: str | None
    context_window: int | None
    budget: int | None = None
    watermark_base: int | None = None
    recall_share_tokens: int | None = None
    prompt_tokens: int | None = None
    watermark: float | None = None
    level: str | None = None
    calibration_ratio: float | None = None
    counts: Counts
    notes: JsonObject | None
    facts: list[Fact]
    last_offload: JsonObject | None


class Chunk(_Answer):
    chunk_id: str
    session_id: str
    kind: str
    turn_range: list[int]
    roles: list[str]
    first_ts: str
    last_ts: str
    tokens: int
    summary_hint: str
    embedding_model: str | None
    needs_embedding: bool
    content_hash: str
    raw_text: str
    messages: list[JsonObject]
    superseded_turn: int | None = None


class MemoryAnswer(_Answer):
    """A memory tool call's answer: `text` is what the model reads."""

    type: str
    text: str
    result: JsonObject


class ToolDefinitions(_Answer):
    """The memory tool in each provider's `tools` form, with only the types the key may call."""

    types: list[str]
    openai: JsonObject
    anthropic: JsonObject
