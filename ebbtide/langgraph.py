"""A LangGraph `pre_model_hook` that puts every model call's context through Ebbtide.

    from langgraph.prebuilt import create_react_agent
    from ebbtide.client import Ebbtide
    from ebbtide.langgraph import pre_model_hook

    hook = pre_model_hook(Ebbtide(), model="gpt-4o")
    agent = create_react_agent(model, tools, pre_model_hook=hook, checkpointer=checkpointer)
    agent.invoke({"messages": [("user", "...")]}, {"configurable": {"thread_id": "ticket-4711"}})

The graph's state keeps the whole conversation; before each model call the hook posts it to
Ebbtide as a whole history (`whole_history`: only what the session lacks is stored) and answers
`llm_input_messages`, the prompt Ebbtide assembled, leaving the state as it is. The session is
the thread id unless `session_of` says otherwise. `ebbtide` is a client (its caller closes it)
or Ebbtide's base URL (a client is made for each call and closed after it). LangGraph 1
deprecates `create_react_agent` for `langchain.agents.create_agent`: its middleware is
`ebbtide.langchain.EbbtideMiddleware`. Install with `pip install 'ebbtide[langgraph]'`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages, convert_to_openai_messages
from langchain_core.runnables import RunnableConfig

from ebbtide.client import AsyncEbbtide, Ebbtide, async_client, sync_client
from ebbtide.types import TurnResult

State = dict[str, Any]
SessionOf = Callable[[RunnableConfig], str]


def thread_session(config: RunnableConfig) -> str:
    """The session of a run: its `thread_id`."""
    thread = (config.get("configurable") or {}).get("thread_id")
    if not thread:
        raise ValueError("run the graph with config={'configurable': {'thread_id': ...}}")
    return str(thread)


def _history(state: State) -> list[dict[str, Any]]:
    messages: list[BaseMessage] = state["messages"]
    return list(convert_to_openai_messages(messages))


def _llm_input(turn: TurnResult) -> State:
    return {"llm_input_messages": convert_to_messages(turn.messages)}


def pre_model_hook(
    ebbtide: Ebbtide | str,
    *,
    model: str,
    context_window: int | None = None,
    session_of: SessionOf = thread_session,
) -> Callable[[State, RunnableConfig], State]:
    """The hook for a graph run synchronously (`invoke`, `stream`)."""

    def hook(state: State, config: RunnableConfig) -> State:
        with sync_client(ebbtide) as client:
            turn = client.turn(
                session_of(config),
                _history(state),
                whole_history=True,
                model=model,
                context_window=context_window,
            )
        return _llm_input(turn)

    return hook


def async_pre_model_hook(
    ebbtide: AsyncEbbtide | str,
    *,
    model: str,
    context_window: int | None = None,
    session_of: SessionOf = thread_session,
) -> Callable[[State, RunnableConfig], Awaitable[State]]:
    """The hook for a graph run asynchronously (`ainvoke`, `astream`)."""

    async def hook(state: State, config: RunnableConfig) -> State:
        async with async_client(ebbtide) as client:
            turn = await client.turn(
                session_of(config),
                _history(state),
                whole_history=True,
                model=model,
                context_window=context_window,
            )
        return _llm_input(turn)

    return hook
