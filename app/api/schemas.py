"""Request and response bodies of the HTTP API (DESIGN §6)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.types import Message

SESSION_ID_PATTERN = r"^[A-Za-z0-9._:\-]{1,128}$"


class PolicyOverride(BaseModel):
    """Per-session overrides of the watermark policy; remembered by the session."""

    model_config = ConfigDict(extra="forbid")

    offload_ratio: float | None = Field(None, gt=0, lt=1)
    emergency_ratio: float | None = Field(None, gt=0, le=1)
    target_ratio: float | None = Field(None, gt=0, lt=1)
    floor_turns: int | None = Field(None, ge=1, le=10_000)
    floor_tokens: int | None = Field(None, ge=0, le=10_000_000)
    cooldown_turns: int | None = Field(None, ge=0, le=10_000)


class TurnRequest(BaseModel):
    """New messages since the last call: the previous assistant reply, tool results, the new
    user input. `system`, `tools`, `model`, `context_window`, `reserve_tokens` and `policy`
    are remembered by the session once sent (send them again only to change them)."""

    model_config = ConfigDict(extra="forbid")

    messages: list[Message] = Field(min_length=1)
    system: str | None = None
    tools: list[dict[str, Any]] | None = None
    model: str | None = Field(None, min_length=1, max_length=256)
    context_window: int | None = Field(None, ge=256, le=100_000_000)
    reserve_tokens: int | None = Field(None, ge=0, le=100_000_000)
    policy: PolicyOverride | None = None
    recall: Literal["auto", "off", "force"] = "auto"
    observed_prompt_tokens: int | None = Field(
        None, ge=0, description="The provider's prompt_tokens for the last assembled prompt."
    )


class Usage(BaseModel):
    prompt_tokens: int
    estimated_prompt_tokens: int
    calibration_ratio: float
    context_window: int
    reserve_tokens: int
    budget: int
    watermark: float = Field(description="prompt_tokens / budget after this turn's offload.")
    trigger_ratio: float = Field(description="prompt_tokens / budget before any offload.")
    level: Literal["normal", "offload", "emergency"]


class OffloadReport(BaseModel):
    triggered: bool
    chunk_ids: list[str]
    tokens_freed: int
    turn_range: list[int] | None
    messages_offloaded: int
    floor_yielded: bool
    oversize_chunk_ids: list[str]
    fallback: str | None


class RecallHit(BaseModel):
    chunk_id: str
    score: float
    vector_score: float | None
    lexical_score: float | None
    turn_range: list[int]
    ts: str
    tokens: int
    truncated: bool


class RecallReport(BaseModel):
    mode: Literal["auto", "off", "force"]
    query_raw: str | None
    query_rewritten: str | None
    hits: list[RecallHit] = Field(description="Injected chunks, in time order.")
    final_k: int
    injected_tokens: int
    no_match: bool = Field(description="The explicit no-match line was injected.")
    skipped_reason: str | None
    fallback: str | None


class RecallRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=4000)
    top_k: int | None = Field(
        None, ge=1, description="Items at most (default: the recall setting; capped by a limit)."
    )
    budget_tokens: int | None = Field(
        None, ge=1, description="Tokens of raw text at most (default: B; capped by a limit)."
    )


class RecallResult(RecallHit):
    text: str = Field(description="Raw chunk text, capped per item; headed by the fields above.")


class RecallResponse(BaseModel):
    query: str
    query_rewritten: str
    results: list[RecallResult] = Field(description="In time order; empty means no match.")
    no_match: bool
    message: str | None = Field(description='"no match" when nothing was found.')
    already_in_context: list[str] = Field(
        default_factory=list,
        description="Matching chunks left out because the latest turn already injected them.",
    )
    fallback: str | None
    timings_ms: dict[str, float]


class FactView(BaseModel):
    id: int | None = Field(description="None for a fact first written by this very turn.")
    kind: Literal[
        "constraint", "preference", "number", "name", "pending_action", "decision", "option"
    ]
    text: str = Field(description="The source sentence, verbatim.")
    source_turn: int
    source_seq: int | None
    role: str


class NotesView(BaseModel):
    text: str | None = Field(description="The scratchpad block in the prompt (C2).")
    tokens: int
    updated: bool = Field(description="The notes were rendered again this turn (an offload).")
    source: Literal["extractive", "llm"] | None
    rejected_constraints: list[str] = Field(
        description="Constraints the chat model dropped or weakened: its notes were rejected."
    )
    missing_constraints: list[str] = Field(
        description="Active constraints the token cap left out of the notes (still in facts)."
    )
    error: str | None
    needs_rebuild: bool
    facts: list[FactView] = Field(description="Active key facts with their sources.")


class TurnResponse(BaseModel):
    session_id: str
    turn: int
    messages: list[dict[str, Any]] = Field(description="The prompt to send, OpenAI format.")
    usage: Usage
    offload: OffloadReport
    recall: RecallReport
    notes: NotesView
    timings_ms: dict[str, float]


class ChunkView(BaseModel):
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


class StatusView(BaseModel):
    model_config = ConfigDict(extra="allow")

    session_id: str
    turns: int
    model: str | None
    context_window: int | None
    counts: dict[str, int]
    notes: dict[str, Any] | None
    facts: list[FactView]
    last_offload: dict[str, Any] | None


class EventView(BaseModel):
    id: int
    turn: int | None
    kind: str = Field(description="turn, remember, forget_requested, forget")
    created_at: str
    payload: dict[str, Any] = Field(
        description="For a turn: trigger_ratio, offload (tokens_freed, chunks_offloaded, …), "
        "recall (query_raw, query_rewritten, recall_ids, rerank_scores, final_k, …), "
        "timings_ms per stage, fallback_flag, notes, facts."
    )


class EventsPage(BaseModel):
    events: list[EventView]
    next_after: int | None = Field(description="Pass as `after` for the next page.")


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorBody(BaseModel):
    error: ErrorDetail


# --- the memory tool (DESIGN §6) ----------------------------------------------------------------

Tags = list[Annotated[str, Field(min_length=1, max_length=64)]]


class _MemoryCall(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MemoryHelp(_MemoryCall):
    type: Literal["help"]


class MemoryRecall(_MemoryCall):
    type: Literal["recall"]
    query: str = Field(min_length=1, max_length=4000)
    top_k: int | None = Field(None, ge=1, description="Items at most (capped by a limit).")


class RememberRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        min_length=1, max_length=100_000, description="The point (length-limited by a setting)."
    )
    tags: Tags = Field(default_factory=list, max_length=16)


class MemoryRemember(RememberRequest):
    type: Literal["remember"]


class MemoryStatus(_MemoryCall):
    type: Literal["status"]


class MemoryOffload(_MemoryCall):
    type: Literal["offload"]
    until_tokens: int | None = Field(None, ge=0, le=100_000_000)


class MemoryForget(_MemoryCall):
    type: Literal["forget"]
    chunk_id: str | None = Field(None, min_length=1, max_length=40)
    turn_start: int | None = Field(None, ge=1)
    turn_end: int | None = Field(None, ge=1)
    confirm: str | None = Field(
        None, min_length=1, max_length=40, description="A pending id to carry out."
    )


MemoryCall = Annotated[
    MemoryHelp | MemoryRecall | MemoryRemember | MemoryStatus | MemoryOffload | MemoryForget,
    Field(discriminator="type"),
]


class MemoryResponse(BaseModel):
    type: str
    text: str = Field(description="The result written for the model: put it in the tool message.")
    result: dict[str, Any] = Field(description="The same result as structured data.")


class RememberResponse(BaseModel):
    chunk_id: str
    duplicate: bool = Field(description="Already stored: nothing was written.")
    facts: list[str] = Field(description="Kinds of the facts stored with it.")


class ToolDefinitions(BaseModel):
    types: list[str] = Field(description="The types this key may call.")
    openai: dict[str, Any] = Field(description="Chat Completions `tools` entry.")
    anthropic: dict[str, Any] = Field(description="Messages API `tools` entry.")
