"""Request and response bodies of the HTTP API (docs/DESIGN.md §6).

Response models read the use cases' typed results (app/core/results.py) by attribute and
decide only how they look on the wire: timestamps as ISO 8601 text, ranges as lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Annotated, Literal, assert_never

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
)

from app.api.message_schemas import (
    AnthropicMessage,
    OpenAIMessage,
    Posted,
    ResponsesItem,
    SystemTextBlock,
    field_of,
)
from app.core import results
from app.core.assemble import PromptFormat
from app.core.errors import ConflictingSystemPrompt
from app.core.facts import CarryFacts
from app.core.formats import (
    SystemPrompt,
    anthropic,
    leading_system,
    read_posted,
    system_from_messages,
)
from app.core.inputs import INT32_MAX, InputModel
from app.core.memory_tool import (
    MemoryAnswer,
    MemoryCall,
    MemoryForget,
    MemoryHelp,
    MemoryOffload,
    MemoryRecall,
    MemoryRemember,
    MemoryResult,
    MemoryStatus,
    RememberArguments,
    ToolHelp,
)
from app.core.messages import Format, Message
from app.core.types import JsonObject

__all__ = [
    "MemoryCall",
    "MemoryForget",
    "MemoryHelp",
    "MemoryOffload",
    "MemoryRecall",
    "MemoryRemember",
    "MemoryStatus",
]

# 1-128 of A-Z a-z 0-9 . _ : -, but not `.` or `..` (path steps, not ids). Written without
# look-ahead, which the validators' regex engine lacks: a first character that is not a dot,
# or a dot then a non-dot, or two dots then anything.
_ID_CHAR = r"[A-Za-z0-9._:\-]"
_NOT_DOT = r"[A-Za-z0-9_:\-]"
SESSION_ID_PATTERN = (
    rf"^(?:{_NOT_DOT}{_ID_CHAR}{{0,127}}|\.{_NOT_DOT}{_ID_CHAR}{{0,126}}|\.\.{_ID_CHAR}{{1,126}})$"
)
CHUNK_ID_PATTERN = r"^[A-Za-z0-9_\-]{1,40}$"
BLOB_HASH_PATTERN = r"^[0-9a-f]{64}$"
EVENT_KIND_PATTERN = r"^[a-z_]{1,32}$"


class PolicyOverride(InputModel):
    """Per-session overrides of the watermark policy; remembered by the session."""

    model_config = ConfigDict(extra="forbid")

    offload_ratio: float | None = Field(None, gt=0, lt=1)
    emergency_ratio: float | None = Field(None, gt=0, le=1)
    target_ratio: float | None = Field(None, gt=0, lt=1)
    floor_turns: int | None = Field(None, ge=1, le=10_000)
    floor_tokens: int | None = Field(None, ge=0, le=10_000_000)
    cooldown_turns: int | None = Field(None, ge=0, le=10_000)
    floor_max_share: float | None = Field(None, ge=0, lt=1)


class CarryFactsField(InputModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    from_session: str = Field(alias="from", pattern=SESSION_ID_PATTERN)
    ids: list[Annotated[int, Field(ge=1, le=2**63 - 1)]] = Field(min_length=1, max_length=32)

    def read(self) -> CarryFacts:
        return CarryFacts(self.from_session, tuple(dict.fromkeys(self.ids)))


class _TurnFields(InputModel):
    """What every input format's turn carries besides its messages. `system`, `tools`,
    `model`, `context_window`, `reserve_tokens` and `policy` are remembered by the session
    once sent (send them again only to change them)."""

    model_config = ConfigDict(extra="forbid")

    tools: list[JsonObject] | None = None
    model: str | None = Field(None, min_length=1, max_length=256)
    context_window: int | None = Field(None, ge=256, le=100_000_000)
    reserve_tokens: int | None = Field(None, ge=0, le=100_000_000)
    policy: PolicyOverride | None = None
    recall: Literal["auto", "off", "force"] = "auto"
    carry_facts: CarryFactsField | None = Field(
        None,
        description="Start from a few active facts of another session of the same tenant "
        "(never its history): each keeps the session and turn it was said in.",
    )
    observed_prompt_tokens: int | None = Field(
        None,
        ge=0,
        le=INT32_MAX,
        description="The provider's prompt_tokens for the last assembled prompt.",
    )
    observed_cached_tokens: int | None = Field(
        None,
        ge=0,
        le=INT32_MAX,
        description="How many of them the provider's prompt cache served (OpenAI "
        "`usage.prompt_tokens_details.cached_tokens`, Anthropic `cache_read_input_tokens`).",
    )
    whole_history: bool = Field(
        False,
        description="`messages` is the whole conversation, as an SDK or an agent framework's "
        "state holds it, not only the new messages: the turn stores what the session's "
        "transcript lacks, and a history that diverges from it (an edited or regenerated "
        "message) archives the stored branch from there (docs/PROXY.md).",
    )
    prompt_format: PromptFormat | None = Field(
        None,
        description="The format of the answer's prompt (default: the input format): "
        "`openai`, `openai-single-system` (one leading system message, for strict chat "
        "templates), `anthropic` (top-level `system` blocks and Messages-API messages), or "
        "`responses` (Responses API input items).",
    )


def read_messages(fmt: Format, posted: Sequence[Posted]) -> list[Message]:
    return [replace(read_posted(fmt, p.posted()), created_at=p.created_at) for p in posted]


def system_from_leading(
    fmt: Format, system: str | None, messages: list[Message]
) -> tuple[SystemPrompt | None, list[Message]]:
    """OpenAI and Responses turns may open with `system` / `developer` messages: they are
    C0, as `system` is; later ones are instructions said at that point of the conversation."""
    leading = leading_system(messages)
    if leading and system is not None:
        raise ConflictingSystemPrompt(
            "send the system prompt either as `system` or as leading system/developer "
            "messages, not both",
            field="system",
        )
    if leading:
        return system_from_messages(fmt, messages[:leading]), messages[leading:]
    return (SystemPrompt(system) if system is not None else None), messages


class OpenAITurnRequest(_TurnFields):
    """New messages since the last call, as Chat Completions messages: the previous
    assistant reply as received, tool results, the new user input."""

    format: Literal["openai"] = "openai"
    messages: list[OpenAIMessage] = Field(min_length=1)
    system: str | None = None

    def read(self) -> tuple[SystemPrompt | None, list[Message]]:
        """C0 (None: unchanged) and the turn's messages in the one message model."""
        return system_from_leading(
            Format.OPENAI, self.system, read_messages(Format.OPENAI, self.messages)
        )


def anthropic_system(system: str | list[SystemTextBlock] | None) -> SystemPrompt | None:
    """Anthropic's top-level `system` as C0, kept as posted (blocks with `cache_control`)."""
    if system is None:
        return None
    posted = system if isinstance(system, str) else [block.posted() for block in system]
    return SystemPrompt(anthropic.system_text(posted), Format.ANTHROPIC, posted)


class AnthropicTurnRequest(_TurnFields):
    """New messages since the last call, as Messages-API messages; `system` as the API
    takes it (a string, or text blocks with `cache_control`)."""

    format: Literal["anthropic"]
    messages: list[AnthropicMessage] = Field(min_length=1)
    system: str | list[SystemTextBlock] | None = None

    def read(self) -> tuple[SystemPrompt | None, list[Message]]:
        return anthropic_system(self.system), read_messages(Format.ANTHROPIC, self.messages)


class ResponsesTurnRequest(_TurnFields):
    """New input items since the last call, as the Responses API takes them; leading
    system/developer message items are the system prompt."""

    format: Literal["responses"]
    messages: list[ResponsesItem] = Field(min_length=1)
    system: str | None = None

    def read(self) -> tuple[SystemPrompt | None, list[Message]]:
        items = read_messages(Format.RESPONSES, self.messages)
        return system_from_leading(Format.RESPONSES, self.system, items)


def _format_of(value: object) -> object:
    return field_of(value, "format", Format.OPENAI.value)


TurnRequest = Annotated[
    Annotated[OpenAITurnRequest, Tag("openai")]
    | Annotated[AnthropicTurnRequest, Tag("anthropic")]
    | Annotated[ResponsesTurnRequest, Tag("responses")],
    Discriminator(
        _format_of,
        custom_error_type="unknown_format",
        custom_error_message="format must be one of: openai, anthropic, responses",
    ),
]
TurnRequestBody = OpenAITurnRequest | AnthropicTurnRequest | ResponsesTurnRequest
TURN_FORMATS = frozenset(f.value for f in Format)


def _iso(moment: object) -> object:
    return moment.isoformat() if isinstance(moment, datetime) else moment


def _iso_seconds(moment: object) -> object:
    return moment.isoformat(timespec="seconds") if isinstance(moment, datetime) else moment


Timestamp = Annotated[str, BeforeValidator(_iso)]
TimestampSeconds = Annotated[str, BeforeValidator(_iso_seconds)]


class _View(BaseModel):
    """A response body read from a result's attributes."""

    model_config = ConfigDict(from_attributes=True)


class Usage(_View):
    prompt_tokens: int
    estimated_prompt_tokens: int
    calibration_ratio: float
    context_window: int
    reserve_tokens: int
    recall_share_tokens: int = Field(
        description="R, the part of the budget kept for recalled text (budget.recall_share): "
        "recalled blocks, held and new, never take more."
    )
    budget: int = Field(
        description="context_window − reserve_tokens: prompt_tokens never exceeds it, recalled "
        "text included."
    )
    watermark_base: int = Field(
        description="budget − recall_share_tokens: the offload and emergency lines are shares "
        "of it."
    )
    watermark: float = Field(
        description="The prompt without recalled text / watermark_base, after this turn's offload."
    )
    trigger_ratio: float = Field(
        description="The prompt without recalled text / watermark_base, before any offload."
    )
    level: Literal["normal", "offload", "emergency"]
    observed_prompt_tokens: int | None = Field(
        description="What the client reported of the previous prompt, as sent."
    )
    observed_cached_tokens: int | None = Field(
        description="Of those, what the provider's prompt cache served, as sent."
    )


class OffloadReport(_View):
    triggered: bool
    chunk_ids: list[str]
    tokens_freed: int
    turn_range: list[int] | None
    messages_offloaded: int
    floor_yielded: bool
    oversize_chunk_ids: list[str]
    fallback: str | None


class RecallHit(_View):
    chunk_id: str
    rank: int = Field(description="1 for the best hit of the query, then 2, 3, …")
    score: float = Field(description="The fused score that ranks the hits of one query.")
    confidence: float = Field(
        ge=0,
        le=1,
        description="How likely the hit holds what was asked: of the hits at this confidence "
        "on the evaluation sets' dev halves, about this share held evidence (docs/RECALL.md).",
    )
    margin: float = Field(
        description="What the chunk says scores above the query's median candidate."
    )
    lead: float = Field(description="… and above the next candidate's.")
    vector_score: float | None = Field(
        description="Cosine of the chunk's best unit with the query (None: found by words only)."
    )
    lexical_score: float | None
    turn_range: list[int]
    ts: TimestampSeconds
    tokens: int
    truncated: bool


class RecallReport(_View):
    mode: Literal["auto", "off", "force"]
    query_raw: str | None
    query_rewritten: str | None
    hits: list[RecallHit] = Field(
        description="Injected chunks, in time order (as the block lists them); `rank` orders "
        "them best first."
    )
    final_k: int
    injected_tokens: int
    no_match: bool = Field(description="The explicit no-match line was injected.")
    skipped_reason: str | None
    fallback: str | None
    held_tokens: int = Field(
        description="Tokens of recalled blocks of earlier turns still in the prompt, where they "
        "were injected (history until the next offload)."
    )
    cleared_held: bool = Field(
        description="The held blocks gave way this turn: the room kept for recall was full."
    )
    pending_chunks: int = Field(
        0,
        description="Chunks of the session still in the embedding queue when it searched: "
        "found by their words only until their vectors are written.",
    )
    need: Literal["unasked", "asked", "referenced"] | None = Field(
        None,
        description="What the turn asked of the past: nothing (evidence only when strong), a "
        "question, or a reference to what was said (a lower floor). Null: not judged (no "
        "search, or an external reranker judged).",
    )
    pointers: list[RecallHit] = Field(
        default_factory=list,
        description="Chunks given as one-line pointers (id, turns, a short gist) below the "
        "evidence, best first: counted apart from `hits`.",
    )
    pointer_tokens: int = Field(0, description="Tokens of the pointer lines.")
    repeated: int = Field(
        0,
        description="Hits left out because the prompt already holds what they say (window, "
        "notes or a held block).",
    )


class RecallRequest(InputModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=4000)
    asked_at: AwareDatetime | None = Field(
        None,
        description="When the question is asked (RFC 3339 with an offset): dates in it "
        '("on 12 March", "last Friday", "3月12日") are read in its time zone. '
        "Default: now, in UTC.",
    )
    top_k: int | None = Field(
        None,
        ge=1,
        le=INT32_MAX,
        description="Items at most (default: the recall setting; capped by a limit).",
    )
    budget_tokens: int | None = Field(
        None,
        ge=1,
        le=INT32_MAX,
        description="Tokens of raw text at most (default: B; capped by a limit).",
    )


class RecallResult(RecallHit):
    text: str = Field(description="Raw chunk text, capped per item; headed by the fields above.")


class RecallResponse(_View):
    query: str
    query_rewritten: str
    results: list[RecallResult] = Field(description="Best first; empty means no match.")
    no_match: bool
    message: str | None = Field(description='"no match" when nothing was found.')
    already_in_context: list[str] = Field(
        default_factory=list,
        description="Matching chunks left out because the latest turn already injected them.",
    )
    fallback: str | None
    timings_ms: dict[str, float]
    pending_chunks: int = Field(
        0,
        description="Chunks of the session still in the embedding queue: found by their words "
        "only until their vectors are written.",
    )


class FactView(_View):
    id: int | None = Field(description="None for a fact first written by this very turn.")
    kind: Literal[
        "constraint",
        "preference",
        "number",
        "name",
        "pending_action",
        "decision",
        "option",
        "amount",
        "date",
        "party",
        "identifier",
    ]
    text: str = Field(
        description="The source sentence, verbatim; for a stated fact (amount, date, party, "
        "identifier) its subject, value and the words said."
    )
    source_turn: int
    source_seq: int | None
    role: str
    subject: str | None = Field(None, description="What a stated fact is of: 'pilot budget'.")
    value: str | None = Field(
        None,
        description="A stated fact's normalised value: '48500 EUR', '2027-03-14', a name or "
        "an identifier as written.",
    )
    carried_from: str | None = Field(
        None,
        description="The session this fact was carried from (`carry_facts`); `source_turn` is "
        "its turn there.",
    )
    carried_fact_id: int | None = Field(None, description="Its id in that session.")


class NotesView(_View):
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
    proposed_kept: int = Field(
        0,
        description="Facts the chat model proposed this turn that their message says "
        "(EBBTIDE_LLM__PROPOSE_FACTS); the rules' own facts come first.",
    )
    proposed_dropped: int = Field(
        0, description="Facts it proposed whose key words their message does not say: dropped."
    )


class TurnResponse(_View):
    session_id: str
    turn: int
    prompt_format: PromptFormat
    system: list[JsonObject] | None = Field(
        description="Anthropic's top-level `system` blocks (prompt_format `anthropic` only)."
    )
    messages: list[JsonObject] = Field(description="The prompt to send, in prompt_format.")
    usage: Usage
    offload: OffloadReport
    recall: RecallReport
    notes: NotesView
    timings_ms: dict[str, float]


class ChunkView(_View):
    chunk_id: str
    session_id: str
    kind: str
    turn_range: list[int]
    roles: list[str]
    first_ts: Timestamp
    last_ts: Timestamp
    tokens: int
    summary_hint: str
    embedding_model: str | None
    needs_embedding: bool
    content_hash: str
    raw_text: str
    messages: list[JsonObject] = Field(
        description="The messages as posted (`seq`, `format`, `posted`); each image, clip or "
        "file payload is an `ebbtide-blob:sha256:<hash>` reference, its bytes at "
        "GET /sessions/{id}/blobs/{hash}."
    )
    superseded_turn: int | None = Field(
        None,
        description="Set when a client's diverging history archived this chunk (proxy mode): "
        "kept and readable here, out of recall since that turn.",
    )


class Levels(_View):
    offload_at: int
    emergency_at: int
    target: int


class PolicyView(_View):
    offload_ratio: float
    emergency_ratio: float
    target_ratio: float
    floor_turns: int
    floor_tokens: int
    cooldown_turns: int
    floor_max_share: float


class Counts(_View):
    window_messages: int
    window_tokens: int
    offloaded_messages: int
    chunks: int
    superseded_messages: int = Field(
        description="Messages archived when a client's history diverged (proxy mode)."
    )


class NotesState(_View):
    text: str | None
    tokens: int
    needs_rebuild: bool


class LastOffload(_View):
    turn: int | None
    triggered: bool
    tokens_freed: int
    chunks_offloaded: int
    chunk_ids: list[str]
    turn_range: list[int] | None
    floor_yielded: bool
    at: Timestamp


class StatusView(_View):
    """The window fields are null while no window is known for the session's model."""

    session_id: str
    turns: int
    model: str | None
    context_window: int | None
    reserve_tokens: int | None = None
    recall_share_tokens: int | None = Field(None, description="R, kept for recalled text.")
    budget: int | None = Field(None, description="context_window − reserve_tokens.")
    watermark_base: int | None = Field(
        None, description="budget − recall_share_tokens: the levels are shares of it."
    )
    prompt_tokens: int | None = Field(None, description="The last prompt, recalled text aside.")
    watermark: float | None = None
    level: Literal["normal", "offload", "emergency"] | None = None
    levels: Levels | None = None
    policy: PolicyView | None = None
    calibration_ratio: float | None = None
    counts: Counts
    notes: NotesState | None
    facts: list[FactView]
    last_offload: LastOffload | None

    @classmethod
    def of(cls, status: results.SessionStatus) -> StatusView:
        window = status.window
        return cls(
            session_id=status.session_id,
            turns=status.turns,
            model=status.model,
            context_window=window.context_window if window else None,
            reserve_tokens=window.reserve_tokens if window else None,
            recall_share_tokens=window.recall_share_tokens if window else None,
            budget=window.budget if window else None,
            watermark_base=window.watermark_base if window else None,
            prompt_tokens=window.prompt_tokens if window else None,
            watermark=window.watermark if window else None,
            level=window.level.value if window else None,
            levels=Levels.model_validate(window.levels) if window else None,
            policy=PolicyView.model_validate(window.policy) if window else None,
            calibration_ratio=window.calibration_ratio if window else None,
            counts=Counts.model_validate(status.counts),
            notes=NotesState.model_validate(status.notes) if status.notes else None,
            facts=[FactView.model_validate(f) for f in status.facts],
            last_offload=LastOffload.model_validate(status.last_offload)
            if status.last_offload
            else None,
        )


class EventView(_View):
    id: int
    turn: int | None
    kind: str = Field(description="turn, remember, forget_requested, forget")
    created_at: Timestamp
    payload: JsonObject = Field(
        description="For a turn: trigger_ratio, offload (tokens_freed, chunks_offloaded, …), "
        "recall (query_raw, query_rewritten, recall_ids, rerank_scores, final_k, …), "
        "timings_ms per stage, fallback_flag, notes, facts."
    )


class EventsPage(_View):
    events: list[EventView]
    next_after: int | None = Field(description="Pass as `after` for the next page.")


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: JsonObject = Field(default_factory=dict)


class ErrorBody(BaseModel):
    error: ErrorDetail


# --- the memory tool (docs/DESIGN.md §6) --------------------------------------


class RememberRequest(RememberArguments):
    """One short point to keep: stored once, length- and rate-limited."""


class RememberResponse(_View):
    chunk_id: str
    duplicate: bool = Field(description="Already stored: nothing was written.")
    facts: list[str] = Field(description="Kinds of the facts stored with it.")


class FactsCarriedView(_View):
    from_session: str
    carried: list[int] = Field(description="Ids, in that session, of the facts carried now.")
    texts: list[str] = Field(description="Their texts, as they now stand in this session.")
    already_carried: list[int] = Field(
        description="Ids carried by an earlier call or turn: not written twice."
    )


class TypeUsage(_View):
    summary: str
    use_when: str
    do_not_use_when: str
    arguments: dict[str, str]


class HelpView(_View):
    tool: str
    types: dict[str, TypeUsage]
    result_format: str
    no_match: str


class OffloadScheduledView(_View):
    scheduled: bool
    until_tokens: int | None
    prompt_tokens: int
    applies: str


class ForgetPreview(_View):
    chunk_id: str
    kind: str
    turn_range: list[int]
    tokens: int
    summary_hint: str


class ForgetPendingView(_View):
    status: Literal["pending"]
    pending_id: str
    expires_at: TimestampSeconds
    preview: list[ForgetPreview]
    confirm_with: dict[str, str] = Field(description="The call that carries the request out.")
    note: str


class ForgetDoneView(_View):
    status: Literal["deleted"]
    chunks_deleted: int
    request_id: str
    chunk_ids: list[str]
    turn_ranges: list[list[int]]
    tokens: int
    facts_deleted: int
    requested_by: str
    confirmed_by: str


MemoryAnswerView = (
    HelpView
    | RecallResponse
    | StatusView
    | RememberResponse
    | FactsCarriedView
    | OffloadScheduledView
    | ForgetPendingView
    | ForgetDoneView
)


def answer_view(answer: MemoryAnswer) -> MemoryAnswerView:
    match answer:
        case ToolHelp():
            return HelpView.model_validate(answer)
        case results.RecallResult():
            return RecallResponse.model_validate(answer)
        case results.SessionStatus():
            return StatusView.of(answer)
        case results.RememberResult():
            return RememberResponse.model_validate(answer)
        case results.FactsCarried():
            return FactsCarriedView.model_validate(answer)
        case results.OffloadScheduled():
            return OffloadScheduledView.model_validate(answer)
        case results.ForgetPending():
            return ForgetPendingView.model_validate(answer)
        case results.ForgetDone():
            return ForgetDoneView.model_validate(answer)
    assert_never(answer)


class MemoryResponse(BaseModel):
    type: str
    text: str = Field(description="The result written for the model: put it in the tool message.")
    result: MemoryAnswerView = Field(description="The same result as structured data.")

    @classmethod
    def of(cls, answer: MemoryResult) -> MemoryResponse:
        return cls(type=answer.type.value, text=answer.text, result=answer_view(answer.result))


class ToolDefinitions(_View):
    types: list[str] = Field(description="The types this key may call.")
    openai: JsonObject = Field(description="Chat Completions `tools` entry.")
    anthropic: JsonObject = Field(description="Messages API `tools` entry.")


class EngineView(_View):
    postgres: str = Field(description='The server\'s version, e.g. "18.6".')
    vector: str | None = Field(description="pgvector's version (none: not installed).")
    lexical: str = Field(description='The lexical ranking: "tsvector" (docs/DESIGN.md §4).')


class Readiness(BaseModel):
    status: str
    engine: EngineView
