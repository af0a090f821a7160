"""The messages a turn accepts, one schema per input format (docs/DESIGN.md §6).

Each schema checks what the service relies on (roles, the ids that pair tool calls with their
results, the shape of every part it reads) and lets everything else through: unknown fields
and unknown part types are kept, so a reply can be posted back exactly as the provider's SDK
returned it. The object as posted is kept key for key (`posted()`); `created_at`, Ebbtide's
own field, is taken out of it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidatorFunctionWrapHandler,
    model_validator,
)

from app.core.inputs import InputModel, unstorable
from app.core.types import JsonObject

Id = Annotated[str, Field(min_length=1, max_length=256)]
Name = Annotated[str, Field(max_length=256)]


class _Open(BaseModel):
    """A nested shape: unknown fields pass through."""

    model_config = ConfigDict(extra="allow")


class KeptAsPosted(InputModel):
    """An object whose posted form is kept key for key (`posted()`)."""

    model_config = ConfigDict(extra="allow")
    _posted: JsonObject = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_as_posted(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        model = handler(value)  # the fields it declares name themselves in errors
        if isinstance(value, dict):
            problem = unstorable(value)  # nested parts and unknown fields are stored too
            if problem is not None:
                raise ValueError(f"text must not contain {problem}")
        if isinstance(value, dict) and isinstance(model, KeptAsPosted):
            model._posted = {k: v for k, v in value.items() if k != "created_at"}
        return model

    def posted(self) -> JsonObject:
        return self._posted


class Posted(KeptAsPosted):
    """A message or item as the client posted it."""

    created_at: AwareDatetime | None = Field(
        None,
        description="When it was said (RFC 3339 with an offset); Ebbtide's field, never sent "
        "to a provider. Default: when the service received it.",
    )


def field_of(value: Any, key: str, default: Any = None) -> Any:
    """A discriminator's view of `value`: a posted dict's key, a model's attribute, else None
    (which pydantic reports as a missing tag)."""
    if isinstance(value, dict):
        return value.get(key, default)
    if isinstance(value, BaseModel):
        return getattr(value, key, None)
    return None


def _tag(known: tuple[str, ...], key: str, default: str | None = None) -> Any:
    """A discriminator on `key` that sends unknown values to the `other` schema."""

    def pick(value: Any) -> str | None:
        if not isinstance(value, dict | BaseModel):
            return None
        found = field_of(value, key, default)
        return found if found in known else "other"

    return Discriminator(pick)


# --- OpenAI Chat Completions ---------------------------------------------------------------


class TextPart(_Open):
    type: Literal["text"]
    text: str


class ImageUrl(_Open):
    url: str = Field(min_length=1)
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(_Open):
    type: Literal["image_url"]
    image_url: ImageUrl


class InputAudio(_Open):
    data: str = Field(min_length=1)
    format: str = Field(min_length=1, max_length=16)


class AudioPart(_Open):
    type: Literal["input_audio"]
    input_audio: InputAudio


class FileRef(_Open):
    file_data: str | None = None
    file_id: str | None = None
    filename: str | None = None


class FilePart(_Open):
    type: Literal["file"]
    file: FileRef


class RefusalPart(_Open):
    type: Literal["refusal"]
    refusal: str


class OtherPart(_Open):
    """A part of a type this service does not read: kept as it came."""

    type: str = Field(min_length=1, max_length=64)


OpenAIPart = Annotated[
    Annotated[TextPart, Tag("text")]
    | Annotated[ImagePart, Tag("image_url")]
    | Annotated[AudioPart, Tag("input_audio")]
    | Annotated[FilePart, Tag("file")]
    | Annotated[RefusalPart, Tag("refusal")]
    | Annotated[OtherPart, Tag("other")],
    _tag(("text", "image_url", "input_audio", "file", "refusal"), "type"),
]
OpenAIContent = str | list[OpenAIPart]


class FunctionCall(_Open):
    name: Id
    arguments: str = ""


class FunctionToolCall(_Open):
    id: Id
    type: Literal["function"] = "function"
    function: FunctionCall


class CustomCall(_Open):
    name: Id
    input: str = ""


class CustomToolCall(_Open):
    id: Id
    type: Literal["custom"]
    custom: CustomCall


ToolCallIn = Annotated[
    Annotated[FunctionToolCall, Tag("function")] | Annotated[CustomToolCall, Tag("custom")],
    Discriminator(lambda v: field_of(v, "type", "function")),
]


class ThinkingBlock(_Open):
    type: Literal["thinking", "redacted_thinking"]
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None


class AudioRef(_Open):
    id: Id


class _NotAssistantOrTool(Posted):
    """Refuses the fields that pair calls with results where they cannot be meant."""

    @model_validator(mode="after")
    def _no_call_fields(self) -> _NotAssistantOrTool:
        extra = self.model_extra or {}
        if "tool_calls" in extra:
            raise ValueError("only assistant messages carry tool_calls")
        if "tool_call_id" in extra:
            raise ValueError("only tool messages carry tool_call_id")
        return self


class SystemMessage(_NotAssistantOrTool):
    role: Literal["system", "developer"]
    content: OpenAIContent
    name: Name | None = None


class UserMessage(_NotAssistantOrTool):
    role: Literal["user"]
    content: OpenAIContent
    name: Name | None = None


class AssistantMessage(Posted):
    """A reply as the SDK returned it: any of content, refusal, audio, tool calls or
    reasoning, and whatever else the provider added."""

    role: Literal["assistant"]
    content: OpenAIContent | None = None
    refusal: str | None = None
    audio: AudioRef | None = None
    tool_calls: list[ToolCallIn] | None = None
    reasoning_content: str | None = None
    thinking_blocks: list[ThinkingBlock] | None = None
    name: Name | None = None

    @model_validator(mode="after")
    def _says_something(self) -> AssistantMessage:
        said = (self.content, self.refusal, self.audio, self.tool_calls, self.reasoning_content)
        if all(value is None or value == [] for value in said) and not self.thinking_blocks:
            raise ValueError(
                "an assistant message needs content, refusal, audio, tool_calls or reasoning"
            )
        return self


class ToolMessage(Posted):
    role: Literal["tool"]
    content: OpenAIContent
    tool_call_id: Id


def _role_of(value: Any) -> Any:
    role = field_of(value, "role")
    return "system" if role == "developer" else role


OpenAIMessage = Annotated[
    Annotated[SystemMessage, Tag("system")]
    | Annotated[UserMessage, Tag("user")]
    | Annotated[AssistantMessage, Tag("assistant")]
    | Annotated[ToolMessage, Tag("tool")],
    Discriminator(
        _role_of,
        custom_error_type="unknown_role",
        custom_error_message="role must be one of: system, developer, user, assistant, tool",
    ),
]


# --- Anthropic Messages ----------------------------------------------------------------------


class Source(_Open):
    type: Literal["base64", "url", "file", "text", "content"]
    media_type: str | None = Field(None, max_length=128)
    data: str | None = None
    url: str | None = None
    file_id: str | None = None


class TextBlock(_Open):
    type: Literal["text"]
    text: str


class ImageBlock(_Open):
    type: Literal["image"]
    source: Source


class DocumentBlock(_Open):
    type: Literal["document"]
    source: Source
    title: str | None = None


class ToolUseBlock(_Open):
    type: Literal["tool_use"]
    id: Id
    name: Id
    input: dict[str, Any]


class ResultTextOrMedia(_Open):
    type: str = Field(min_length=1, max_length=64)


class ToolResultBlock(_Open):
    type: Literal["tool_result"]
    tool_use_id: Id
    content: str | list[ResultTextOrMedia] | None = None
    is_error: bool | None = None


class SignedThinkingBlock(_Open):
    type: Literal["thinking"]
    thinking: str
    signature: str


class RedactedThinkingBlock(_Open):
    type: Literal["redacted_thinking"]
    data: str


class OtherBlock(_Open):
    type: str = Field(min_length=1, max_length=64)


ANTHROPIC_BLOCKS = ("text", "image", "document", "tool_use", "tool_result", "thinking")
AnthropicBlock = Annotated[
    Annotated[TextBlock, Tag("text")]
    | Annotated[ImageBlock, Tag("image")]
    | Annotated[DocumentBlock, Tag("document")]
    | Annotated[ToolUseBlock, Tag("tool_use")]
    | Annotated[ToolResultBlock, Tag("tool_result")]
    | Annotated[SignedThinkingBlock, Tag("thinking")]
    | Annotated[RedactedThinkingBlock, Tag("redacted_thinking")]
    | Annotated[OtherBlock, Tag("other")],
    _tag((*ANTHROPIC_BLOCKS, "redacted_thinking"), "type"),
]
# Blocks only the model writes, and blocks only the user's side sends back.
ASSISTANT_ONLY = frozenset({"tool_use", "thinking", "redacted_thinking"})
USER_ONLY = frozenset({"tool_result"})


class AnthropicMessage(Posted):
    role: Literal["user", "assistant"]
    content: str | list[AnthropicBlock]

    @model_validator(mode="after")
    def _blocks_fit_role(self) -> AnthropicMessage:
        if isinstance(self.content, str):
            return self
        wrong = ASSISTANT_ONLY if self.role == "user" else USER_ONLY
        for block in self.content:
            if block.type in wrong:
                raise ValueError(f"a {self.role} message cannot carry a {block.type} block")
        return self


class SystemTextBlock(KeptAsPosted):
    type: Literal["text"]
    text: str


# --- Responses API input items -----------------------------------------------------------------


class ResponsesPart(_Open):
    type: str = Field(min_length=1, max_length=64)
    text: str | None = None


class MessageItem(Posted):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[ResponsesPart]


class FunctionCallItem(Posted):
    type: Literal["function_call"]
    call_id: Id
    name: Id
    arguments: str = ""


class FunctionCallOutputItem(Posted):
    type: Literal["function_call_output"]
    call_id: Id
    output: str | list[ResponsesPart]


class SummaryText(_Open):
    type: str = "summary_text"
    text: str = ""


class ReasoningItem(Posted):
    type: Literal["reasoning"]
    summary: list[SummaryText] = Field(default_factory=list)
    encrypted_content: str | None = None


class OtherItem(Posted):
    """A built-in tool call, an item reference, …: kept as it came."""

    type: str = Field(min_length=1, max_length=64)


RESPONSES_ITEMS = ("message", "function_call", "function_call_output", "reasoning")
ResponsesItem = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[ReasoningItem, Tag("reasoning")]
    | Annotated[OtherItem, Tag("other")],
    _tag(RESPONSES_ITEMS, "type", default="message"),
]

# The tags pydantic writes into an error's path for the message and item unions above.
MESSAGE_TAGS = frozenset({"system", "user", "assistant", "tool", "other", *RESPONSES_ITEMS})
