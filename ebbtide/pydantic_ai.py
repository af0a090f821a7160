"""A pydantic-ai capability that shows the model Ebbtide's window and leaves the agent's
history alone.

    from pydantic_ai import Agent
    from ebbtide.client import AsyncEbbtide
    from ebbtide.pydantic_ai import EbbtideWindow

    window = EbbtideWindow(AsyncEbbtide(), "ticket-4711", model="gpt-4o")
    agent = Agent("openai:gpt-4o", capabilities=[window])
    result = await agent.run("...", message_history=earlier.all_messages())

Before each model request the capability sends the run's whole history to Ebbtide
(`whole_history`: only what the session lacks is stored) as Chat Completions messages, and
the model is asked with Ebbtide's prompt as pydantic-ai messages: the system prompt, the
notes, the window and the recalled text, the newest request last. It wraps the request
(`wrap_model_request`) rather than processing the history: what pydantic-ai keeps —
`result.all_messages()`, what the next run is given — grows exactly as it would without
Ebbtide, so Ebbtide never reads a shrunk history as an edit. Text, tool calls and tool
returns cross both ways; thinking parts and other parts that have no Chat Completions form
stay behind. `session` is a session id, or a function of the run context (its deps, for
instance). Supported: pydantic-ai 2.0 and later (`pip install 'ebbtide[pydantic-ai]'`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability, WrapModelRequestHandler
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext

from ebbtide.client import AsyncEbbtide

JsonObject = dict[str, Any]
SessionOf = Callable[[RunContext[Any]], str]


def _user_text(part: UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    return "\n".join(item for item in part.content if isinstance(item, str))


def _request_messages(request: ModelRequest) -> list[JsonObject]:
    out: list[JsonObject] = []
    for part in request.parts:
        if isinstance(part, SystemPromptPart):
            out.append({"role": "system", "content": part.content})
        elif isinstance(part, UserPromptPart):
            out.append({"role": "user", "content": _user_text(part)})
        elif isinstance(part, ToolReturnPart):
            content = part.model_response_str()
            out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": content})
        elif isinstance(part, RetryPromptPart):
            if part.tool_call_id and part.tool_name:
                content = part.model_response()
                out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": content})
            else:
                out.append({"role": "user", "content": part.model_response()})
    return out


def _response_message(response: ModelResponse) -> JsonObject:
    text = "".join(part.content for part in response.parts if isinstance(part, TextPart))
    calls = [
        {
            "id": part.tool_call_id,
            "type": "function",
            "function": {"name": part.tool_name, "arguments": part.args_as_json_str()},
        }
        for part in response.parts
        if isinstance(part, ToolCallPart)
    ]
    message: JsonObject = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    elif not text:
        message["content"] = ""
    return message


def to_openai(messages: Sequence[ModelMessage]) -> list[JsonObject]:
    """The history as Chat Completions messages."""
    out: list[JsonObject] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            out.extend(_request_messages(message))
        else:
            out.append(_response_message(message))
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _response(message: JsonObject) -> ModelResponse:
    parts: list[ModelResponsePart] = []
    if _text(message.get("content")):
        parts.append(TextPart(_text(message["content"])))
    for call in message.get("tool_calls") or ():
        function = call["function"]
        parts.append(ToolCallPart(function["name"], function["arguments"], call["id"]))
    return ModelResponse(parts=parts)


def from_openai(messages: Sequence[JsonObject]) -> list[ModelMessage]:
    """Ebbtide's prompt as pydantic-ai messages: runs of system, user and tool messages
    become one request each, assistant messages responses."""
    out: list[ModelMessage] = []
    pending: list[ModelRequestPart] = []
    call_names: dict[str, str] = {}
    for message in messages:
        role = message["role"]
        if role == "assistant":
            if pending:
                out.append(ModelRequest(parts=pending))
                pending = []
            response = _response(message)
            call_names.update(
                {p.tool_call_id: p.tool_name for p in response.parts if isinstance(p, ToolCallPart)}
            )
            out.append(response)
        elif role == "tool":
            call_id = message["tool_call_id"]
            name = call_names.get(call_id, "tool")
            pending.append(ToolReturnPart(name, _text(message.get("content")), call_id))
        elif role in ("system", "developer"):
            pending.append(SystemPromptPart(_text(message.get("content"))))
        else:
            pending.append(UserPromptPart(_text(message.get("content"))))
    if pending:
        out.append(ModelRequest(parts=pending))
    return out


def _with_instructions(window: list[ModelMessage], history: Sequence[ModelMessage]) -> None:
    """pydantic-ai 2.0 reads a run's instructions off the newest request of what it sends:
    the window's newest request carries the history's."""
    newest = history[-1] if history else None
    if window and isinstance(window[-1], ModelRequest) and isinstance(newest, ModelRequest):
        window[-1].instructions = newest.instructions


@dataclass
class EbbtideWindow(AbstractCapability[Any]):
    """Each model request of the agent asked with Ebbtide's window of its whole history."""

    ebbtide: AsyncEbbtide
    session: str | SessionOf
    model: str
    context_window: int | None = None

    def session_of(self, ctx: RunContext[Any]) -> str:
        return self.session if isinstance(self.session, str) else self.session(ctx)

    async def window(
        self, ctx: RunContext[Any], history: Sequence[ModelMessage]
    ) -> list[ModelMessage]:
        """Ebbtide's prompt for `history`, as pydantic-ai messages."""
        turn = await self.ebbtide.turn(
            self.session_of(ctx),
            to_openai(history),
            whole_history=True,
            model=self.model,
            context_window=self.context_window,
        )
        window = from_openai(turn.messages)
        _with_instructions(window, history)
        return window

    async def wrap_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        handler: WrapModelRequestHandler,
    ) -> ModelResponse:
        # The request's own list, replaced: the run's history (ctx.messages) is not touched.
        request_context.messages = await self.window(ctx, list(request_context.messages))
        return await handler(request_context)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a client: not part of an agent's spec
