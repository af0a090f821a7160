"""A pydantic-ai history processor that puts every model request's context through Ebbtide.

    from pydantic_ai import Agent
    from pydantic_ai.capabilities import ProcessHistory
    from ebbtide.client import AsyncEbbtide
    from ebbtide.pydantic_ai import history_processor

    context = history_processor(AsyncEbbtide(), "ticket-4711", model="gpt-4o")
    agent = Agent("openai:gpt-4o", capabilities=[ProcessHistory(context)])

Before each model request the processor sends the run's whole history to Ebbtide
(`whole_history`: only what the session lacks is stored) as Chat Completions messages and
answers Ebbtide's prompt as pydantic-ai messages: the system prompt, the notes, the window
and the recalled text, the newest request last. Text, tool calls and tool returns cross both
ways; thinking parts and other parts that have no Chat Completions form stay behind.
`session` is a session id, or a function of the run context (its deps, for instance).
Install with `pip install 'ebbtide[pydantic-ai]'`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic_ai import RunContext
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

from ebbtide.client import AsyncEbbtide

JsonObject = dict[str, Any]
Processor = Callable[[RunContext[Any], list[ModelMessage]], Awaitable[list[ModelMessage]]]


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


def history_processor(
    ebbtide: AsyncEbbtide,
    session: str | Callable[[RunContext[Any]], str],
    *,
    model: str,
    context_window: int | None = None,
) -> Processor:
    """The processor; hand it to `ProcessHistory` (pydantic-ai 2) or `history_processors`."""

    async def process(ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        session_id = session if isinstance(session, str) else session(ctx)
        turn = await ebbtide.turn(
            session_id,
            to_openai(messages),
            whole_history=True,
            model=model,
            context_window=context_window,
        )
        return from_openai(turn.messages)

    return process
