"""The model-callable `memory` tool (docs/DESIGN.md §6): one tool, an English
`type` enum, one typed call model per type.

What a caller may do follows from its scopes: `help`, `recall` and `status` need read,
`remember` write, while `offload` and `forget` are off unless the key holds their own scope.
The descriptions are written for a model: when to use a type, when not to, what comes back.
Models in strict function-calling mode send every field, `null` for the ones a type does not
take: a call ignores `null` fields, so strict and loose callers are answered alike.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from app.core.inputs import INT32_MAX, InputModel
from app.core.rerank import header
from app.core.results import (
    FactsCarried,
    ForgetDone,
    ForgetPending,
    OffloadScheduled,
    RecallResult,
    RememberResult,
    SessionStatus,
)
from app.core.scopes import Scope, grants

TOOL_NAME = "memory"


class MemoryType(StrEnum):
    HELP = "help"
    RECALL = "recall"
    REMEMBER = "remember"
    CARRY = "carry"
    STATUS = "status"
    OFFLOAD = "offload"
    FORGET = "forget"


SCOPE_OF = {
    MemoryType.HELP: Scope.READ,
    MemoryType.RECALL: Scope.READ,
    MemoryType.STATUS: Scope.READ,
    MemoryType.REMEMBER: Scope.WRITE,
    MemoryType.CARRY: Scope.WRITE,
    MemoryType.OFFLOAD: Scope.OFFLOAD,
    MemoryType.FORGET: Scope.FORGET,
}

RESULT_FORMAT = (
    "recall returns items best first, each headed `#rank (confidence p) [ts | turn a-b | "
    "chunk_id]` and followed by the raw text (cut to a per-item cap, marked when cut); p near 1: "
    "it very likely holds the answer, below 0.3: likely not."
)
NO_MATCH = (
    '"no match" means nothing stored answers the query. Do not guess or invent the detail: '
    "say it is not in memory, or ask the user."
)


@dataclass(frozen=True)
class Usage:
    summary: str
    use_when: str
    do_not_use_when: str
    arguments: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolHelp:
    """What `help` answers: every type the caller may call, and how to read results."""

    tool: str
    types: Mapping[str, Usage]
    result_format: str
    no_match: str


USAGE: dict[MemoryType, Usage] = {
    MemoryType.HELP: Usage(
        "How to use this tool: every type you may call, its arguments and results.",
        "You are unsure which type fits or what a result means.",
        "You already know the type and its arguments.",
        {},
    ),
    MemoryType.RECALL: Usage(
        "Search the earlier conversation that is no longer in your context, word for word.",
        "The user refers to something said earlier (a number, name, decision, file, code) "
        "that you cannot see in the conversation now.",
        "The answer is already in your context, or the question is about general knowledge.",
        {"query": "what to look for, with its distinctive words", "top_k": "items at most"},
    ),
    MemoryType.REMEMBER: Usage(
        "Store one short durable point (a preference, constraint or decision) for later.",
        "The user states a rule, preference or decision that must hold for the rest of the task.",
        "Chit-chat, whole passages, or anything already remembered (duplicates are not "
        "stored twice).",
        {"text": "the point, in one or two sentences", "tags": "e.g. constraint, preference"},
    ),
    MemoryType.CARRY: Usage(
        "Start this session from confirmed facts of another session of the same user "
        "(amounts, dates, names, decisions, constraints): they join this session's notes with "
        "their source session and turn. Never the other session's history.",
        "The user continues a task begun in another session and names facts that still hold.",
        "You have not seen the fact ids (they come from that session's status or turn "
        "results), or the facts no longer hold.",
        {"from_session": "the session the facts were stated in", "fact_ids": "their ids there"},
    ),
    MemoryType.STATUS: Usage(
        "How full the context window is, what was moved out, and the current notes.",
        "You need to know whether earlier turns were moved out of your context.",
        "Every turn: the notes are already in your context.",
        {},
    ),
    MemoryType.OFFLOAD: Usage(
        "Move the oldest turns out of the context before the next turn (kept verbatim).",
        "You are about to start a new, unrelated part of a long task.",
        "The window is not full: the service offloads by itself when it needs to.",
        {"until_tokens": "prompt size to aim for (default: the policy target)"},
    ),
    MemoryType.FORGET: Usage(
        "Delete stored chunks for good. Two steps: a request returns a pending id and a "
        "preview; nothing is deleted until that id is confirmed.",
        "The user asks to delete something they shared (for example a secret).",
        "To tidy up or save space: stored chunks cost nothing in your context.",
        {
            "chunk_id": "a chunk to delete (from a recall result)",
            "turn_start": "or the first turn of a range",
            "turn_end": "and its last turn",
            "confirm": "the pending id of an earlier forget request, to carry it out",
        },
    ),
}

_ARGUMENT_SCHEMAS: dict[str, dict[str, Any]] = {
    "query": {"type": "string", "minLength": 1},
    "top_k": {"type": "integer", "minimum": 1},
    "text": {"type": "string", "minLength": 1},
    "tags": {"type": "array", "items": {"type": "string"}},
    "until_tokens": {"type": "integer", "minimum": 0},
    "chunk_id": {"type": "string"},
    "turn_start": {"type": "integer", "minimum": 1},
    "turn_end": {"type": "integer", "minimum": 1},
    "confirm": {"type": "string"},
    "from_session": {"type": "string", "minLength": 1},
    "fact_ids": {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1},
}


def enabled_types(scopes: Collection[str]) -> list[MemoryType]:
    """The types a caller with these scopes may call, in the enum's order."""
    return [t for t in MemoryType if grants(scopes, SCOPE_OF[t])]


def help_body(types: Sequence[MemoryType]) -> ToolHelp:
    return ToolHelp(
        tool=TOOL_NAME,
        types={t.value: USAGE[t] for t in types},
        result_format=RESULT_FORMAT,
        no_match=NO_MATCH,
    )


def description(types: Sequence[MemoryType]) -> str:
    lines = [
        "Long-term memory of this conversation. Older turns are moved out of your context "
        "but kept word for word; this tool reads and writes them. Call with "
        '{"type": "help"} when unsure.',
    ]
    lines += [
        f"- {t.value}: {USAGE[t].summary} Use when: {USAGE[t].use_when} "
        f"Do not use when: {USAGE[t].do_not_use_when}"
        for t in types
    ]
    lines += [RESULT_FORMAT, NO_MATCH]
    return "\n".join(lines)


def parameters(types: Sequence[MemoryType]) -> dict[str, Any]:
    """JSON schema of the arguments: the type enum and the fields those types take."""
    properties: dict[str, Any] = {
        "type": {
            "type": "string",
            "enum": [t.value for t in types],
            "description": "What to do; call help when unsure.",
        }
    }
    for t in types:
        for name, meaning in USAGE[t].arguments.items():
            properties.setdefault(name, {**_ARGUMENT_SCHEMAS[name], "description": meaning})
    return {"type": "object", "properties": properties, "required": ["type"]}


def openai_tool(types: Sequence[MemoryType]) -> dict[str, Any]:
    """OpenAI function-calling form (chat completions `tools` entry)."""
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": description(types),
            "parameters": parameters(types),
        },
    }


def anthropic_tool(types: Sequence[MemoryType]) -> dict[str, Any]:
    """Anthropic Messages API form (`tools` entry)."""
    return {"name": TOOL_NAME, "description": description(types), "input_schema": parameters(types)}


# --- the calls, one model per type -----------------------------------------------------------

Tags = list[Annotated[str, Field(min_length=1, max_length=64)]]


class _MemoryCall(InputModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _ignore_nulls(cls, data: Any) -> Any:
        """Strict-mode callers send `null` for every field a type does not take."""
        if isinstance(data, dict):
            return {name: value for name, value in data.items() if value is not None}
        return data


class MemoryHelp(_MemoryCall):
    type: Literal["help"]


class MemoryRecall(_MemoryCall):
    type: Literal["recall"]
    query: str = Field(min_length=1, max_length=4000)
    top_k: int | None = Field(
        None, ge=1, le=INT32_MAX, description="Items at most (capped by a limit)."
    )


class RememberArguments(_MemoryCall):
    text: str = Field(
        min_length=1, max_length=100_000, description="The point (length-limited by a setting)."
    )
    tags: Tags = Field(default_factory=list, max_length=16)


class MemoryRemember(RememberArguments):
    type: Literal["remember"]


class MemoryCarry(_MemoryCall):
    type: Literal["carry"]
    from_session: str = Field(min_length=1, max_length=128)
    fact_ids: list[Annotated[int, Field(ge=1, le=2**63 - 1)]] = Field(min_length=1, max_length=32)


class MemoryStatus(_MemoryCall):
    type: Literal["status"]


class MemoryOffload(_MemoryCall):
    type: Literal["offload"]
    until_tokens: int | None = Field(None, ge=0, le=100_000_000)


class MemoryForget(_MemoryCall):
    type: Literal["forget"]
    chunk_id: str | None = Field(None, min_length=1, max_length=40)
    turn_start: int | None = Field(None, ge=1, le=INT32_MAX)
    turn_end: int | None = Field(None, ge=1, le=INT32_MAX)
    confirm: str | None = Field(
        None, min_length=1, max_length=40, description="A pending id to carry out."
    )


MemoryCall = Annotated[
    MemoryHelp
    | MemoryRecall
    | MemoryRemember
    | MemoryCarry
    | MemoryStatus
    | MemoryOffload
    | MemoryForget,
    Field(discriminator="type"),
]

MemoryAnswer = (
    ToolHelp
    | RecallResult
    | SessionStatus
    | RememberResult
    | FactsCarried
    | OffloadScheduled
    | ForgetPending
    | ForgetDone
)


@dataclass(frozen=True)
class MemoryResult:
    """A call's answer twice: as data, and as the text for the model's tool message."""

    type: MemoryType
    text: str
    result: MemoryAnswer


# --- results as text for the tool message ---------------------------------------------------


def answer_text(answer: MemoryAnswer) -> str:
    match answer:
        case ToolHelp():
            return help_text(answer)
        case RecallResult():
            return recall_text(answer)
        case SessionStatus():
            return status_text(answer)
        case RememberResult():
            return remember_text(answer)
        case FactsCarried():
            return carry_text(answer)
        case OffloadScheduled():
            return offload_text(answer)
        case ForgetPending() | ForgetDone():
            return forget_text(answer)


def _iso_seconds(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def recall_text(result: RecallResult) -> str:
    """The results best first, each headed by its rank and confidence, then where it came
    from (`[ts | turn a-b | chunk_id]`)."""
    items = [
        f"#{r.rank} (confidence {r.confidence:.2f}) "
        f"{header(_iso_seconds(r.ts), r.turn_range[0], r.turn_range[1], r.chunk_id)}\n{r.text}"
        for r in result.results
    ]
    return "\n\n".join(items) if items else str(result.message)


def help_text(body: ToolHelp) -> str:
    lines = [f"{body.tool} tool. Types you may call:"]
    for name, usage in body.types.items():
        arguments = ", ".join(f"{k} ({v})" for k, v in usage.arguments.items()) or "none"
        lines.append(
            f"- {name}: {usage.summary} Use when: {usage.use_when} "
            f"Do not use when: {usage.do_not_use_when} Arguments: {arguments}."
        )
    lines += [body.result_format, body.no_match]
    return "\n".join(lines)


def status_text(status: SessionStatus) -> str:
    counts, window = status.counts, status.window
    usage = (
        f"prompt {window.prompt_tokens} of a {window.budget}-token budget "
        f"(watermark {window.watermark} of {window.watermark_base}, level {window.level})"
        if window is not None and window.budget
        else "window unknown until a turn names the model"
    )
    notes = status.notes.tokens if status.notes else 0
    return (
        f"turn {status.turns}; {usage}; {counts.window_messages} messages in the window, "
        f"{counts.offloaded_messages} offloaded into {counts.chunks} stored chunks "
        f"(recall finds them); notes {notes} tokens."
    )


def remember_text(result: RememberResult) -> str:
    if result.duplicate:
        return f"already stored as {result.chunk_id}; nothing new was written"
    facts = f" and kept in the notes as {', '.join(result.facts)}" if result.facts else ""
    return f"stored as {result.chunk_id}{facts}"


def carry_text(result: FactsCarried) -> str:
    carried = (
        f"carried {len(result.carried)} facts from session {result.from_session} into the "
        f"notes: " + "; ".join(result.texts)
        if result.carried
        else f"nothing new carried from session {result.from_session}"
    )
    already = (
        f" (already carried before: ids {', '.join(map(str, result.already_carried))})"
        if result.already_carried
        else ""
    )
    return carried + already


def offload_text(result: OffloadScheduled) -> str:
    if not result.scheduled:
        return "nothing scheduled: the session's window is not known yet"
    return (
        f"the next turn moves the oldest turns out until the prompt is at most "
        f"{result.until_tokens} tokens (now {result.prompt_tokens}); they stay recallable"
    )


def forget_text(result: ForgetPending | ForgetDone) -> str:
    if isinstance(result, ForgetPending):
        chunks = "; ".join(
            f"{p.chunk_id} (turns {p.turn_range[0]}-{p.turn_range[1]}, {p.tokens} tokens)"
            for p in result.preview
        )
        return (
            f"pending {result.pending_id}: would delete {chunks}. Nothing is deleted until "
            "a person with the memory:forget scope confirms this id."
        )
    return f"deleted {result.chunks_deleted} chunks: {', '.join(result.chunk_ids)}"
