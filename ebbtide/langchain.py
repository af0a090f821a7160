"""A LangChain agent middleware (`langchain.agents.create_agent`) that shows the model
Ebbtide's window and leaves the graph's state alone.

    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver
    from ebbtide.langchain import EbbtideMiddleware

    agent = create_agent(
        model, tools, middleware=[EbbtideMiddleware(model="gpt-4o")], checkpointer=InMemorySaver()
    )
    agent.invoke({"messages": [("user", "...")]}, {"configurable": {"thread_id": "ticket-4711"}})

Before each model call the middleware posts the state's whole conversation (its system
message first) to Ebbtide as a whole history (`whole_history`: only what the session lacks is
stored) and calls the model with the prompt Ebbtide assembled: one system message (the
agent's, with Ebbtide's notes) and the window with the recalled text, opening with a user
turn (`openai-single-system`, which chat models of every provider accept). The state keeps
every message. The session is the thread id unless `session_of` says otherwise.

Ebbtide is reached at `base_url` with a client made for each call and closed after it, or
through `client` / `async_client` when given (the caller closes those). Supported: LangChain
1.0 and later with LangGraph 1.0 and later (`pip install 'ebbtide[langchain]'`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    SystemMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langgraph.config import get_config

from ebbtide.client import AsyncEbbtide, Ebbtide, async_client, sync_client
from ebbtide.langgraph import SessionOf, thread_session
from ebbtide.types import JsonObject, TurnResult

PROMPT_FORMAT = "openai-single-system"
ModelCall = Callable[[ModelRequest], ModelResponse | AIMessage]
AsyncModelCall = Callable[[ModelRequest], Awaitable[ModelResponse | AIMessage]]


def conversation(request: ModelRequest) -> list[JsonObject]:
    """The state's conversation as Chat Completions messages, the system message first."""
    messages: list[BaseMessage] = list(request.messages)
    if request.system_prompt:
        messages.insert(0, SystemMessage(request.system_prompt))
    return list(convert_to_openai_messages(messages))


def windowed(request: ModelRequest, turn: TurnResult) -> ModelRequest:
    """The request with Ebbtide's prompt in place of the state's messages."""
    prompt: list[Any] = convert_to_messages(turn.messages)
    system = prompt[0].text if prompt and isinstance(prompt[0], SystemMessage) else None
    body = prompt[1:] if system is not None else prompt
    if hasattr(request, "system_message"):  # LangChain 1.1 and later
        return request.override(
            system_message=SystemMessage(system) if system is not None else None, messages=body
        )
    # LangChain 1.0: the system message is a string
    overrides: Any = {"system_prompt": system, "messages": body}
    return request.override(**overrides)


class EbbtideMiddleware(AgentMiddleware):
    """Each model call of the agent made with Ebbtide's window of the state's conversation."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str = "http://127.0.0.1:8000",
        api_key: str | None = None,
        client: Ebbtide | None = None,
        async_client: AsyncEbbtide | None = None,
        context_window: int | None = None,
        session_of: SessionOf = thread_session,
    ) -> None:
        super().__init__()
        self.model, self.context_window, self.session_of = model, context_window, session_of
        self.base_url, self.api_key = base_url, api_key
        self.client, self.async_client = client, async_client

    def _options(self) -> JsonObject:
        return {
            "whole_history": True,
            "model": self.model,
            "context_window": self.context_window,
            "prompt_format": PROMPT_FORMAT,
        }

    def wrap_model_call(
        self, request: ModelRequest, handler: ModelCall
    ) -> ModelResponse | AIMessage:
        with sync_client(self.client or self.base_url, self.api_key) as ebbtide:
            session = self.session_of(get_config())
            turn = ebbtide.turn(session, conversation(request), **self._options())
        return handler(windowed(request, turn))

    async def awrap_model_call(
        self, request: ModelRequest, handler: AsyncModelCall
    ) -> ModelResponse | AIMessage:
        async with async_client(self.async_client or self.base_url, self.api_key) as ebbtide:
            session = self.session_of(get_config())
            turn = await ebbtide.turn(session, conversation(request), **self._options())
        return await handler(windowed(request, turn))
