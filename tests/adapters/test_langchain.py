"""The LangChain middleware (ebbtide/langchain.py) and the LangGraph hook (ebbtide/langgraph.py)
on LangChain's fake chat model: each model call gets Ebbtide's window, the graph's state keeps
every message, and the whole history is stored once."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ebbtide.client import AsyncEbbtide, Ebbtide
from ebbtide.langchain import EbbtideMiddleware
from ebbtide.langgraph import async_pre_model_hook, pre_model_hook, thread_session

# Long enough that a window of 1,500 tokens offloads within a few questions.
PADDING = " ".join(f"detail{n} of the itinerary" for n in range(60))
QUESTIONS = 8


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's fake chat model, keeping what each call was given; tools bind to it."""

    seen: list[list[BaseMessage]] = []  # noqa: RUF012 (pydantic field default, copied)

    def bind_tools(self, tools: Any, **_: Any) -> ScriptedChatModel:
        return self

    # Async calls run this too (in an executor): one record per call.
    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


@tool
def lookup(city: str) -> str:
    """The weather in a city."""
    return f"4 °C and rain in {city}"


def replies() -> Iterator[AIMessage]:
    """For each question a tool call, then the answer."""
    for n in range(QUESTIONS):
        yield AIMessage(
            "", tool_calls=[{"name": "lookup", "args": {"city": f"c{n}"}, "id": f"k{n}"}]
        )
        yield AIMessage(f"Answer {n}.")


def question(n: int) -> tuple[str, str]:
    return ("user", f"Question {n}: the weather in c{n}? {PADDING}")


def thread(name: str) -> Any:
    return {"configurable": {"thread_id": f"{name}-{uuid.uuid4().hex[:8]}"}}


def test_a_create_agent_model_call_sees_the_window_and_the_state_keeps_everything(
    ebbtide_url: str,
) -> None:
    model = ScriptedChatModel(messages=replies(), seen=[])
    middleware = EbbtideMiddleware(model="gpt-4o", base_url=ebbtide_url, context_window=1500)
    agent = create_agent(
        model,
        [lookup],
        system_prompt="Answer briefly.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config = thread("lc")
    for n in range(QUESTIONS):
        final = agent.invoke({"messages": [question(n)]}, config)

    # The state keeps every message: four per question (question, call, result, answer).
    assert len(final["messages"]) == 4 * QUESTIONS
    assert final["messages"][-1].content == f"Answer {QUESTIONS - 1}."
    # Each model call was given Ebbtide's window: one system message, then a user turn first.
    assert len(model.seen) == 2 * QUESTIONS
    for seen in model.seen:
        assert seen[0].type == "system" and "Answer briefly." in seen[0].text
        assert seen[1].type == "human"
        assert all(m.type != "system" for m in seen[1:])
    assert len(model.seen[-1]) - 1 < len(final["messages"]) - 1  # the window is smaller
    assert model.seen[-1][-1].type == "tool"
    with Ebbtide(ebbtide_url) as ebbtide:
        status = ebbtide.status(config["configurable"]["thread_id"])
    assert status.turns == 2 * QUESTIONS
    assert status.counts.superseded_messages == 0 and status.counts.offloaded_messages > 0


async def test_the_middleware_runs_async_with_a_client_of_its_caller(ebbtide_url: str) -> None:
    model = ScriptedChatModel(messages=replies(), seen=[])
    async with AsyncEbbtide(ebbtide_url) as ebbtide:
        middleware = EbbtideMiddleware(model="gpt-4o", async_client=ebbtide)
        agent = create_agent(model, [lookup], middleware=[middleware], checkpointer=InMemorySaver())
        config = thread("lc-async")
        await agent.ainvoke({"messages": [question(0)]}, config)
        final = await agent.ainvoke({"messages": [question(1)]}, config)
        status = await ebbtide.status(config["configurable"]["thread_id"])
    assert len(final["messages"]) == 8
    assert [m.type for m in model.seen[1]] == ["human", "ai", "tool"]
    assert status.turns == 4 and status.counts.window_messages == 7  # all but the last answer


def test_a_run_without_a_thread_is_refused() -> None:
    with pytest.raises(ValueError, match="thread_id"):
        thread_session({"configurable": {}})


# create_react_agent moved to `langchain.agents` in LangGraph 1.0; its pre_model_hook stays
# until LangGraph 2.0.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
async def test_a_langgraph_agent_gets_its_model_input_from_ebbtide(ebbtide_url: str) -> None:
    from langgraph.prebuilt import create_react_agent  # deprecated: warns when imported

    model = ScriptedChatModel(
        messages=iter(
            [
                AIMessage(
                    "", tool_calls=[{"name": "lookup", "args": {"city": "Oslo"}, "id": "c1"}]
                ),
                AIMessage("It is 4 °C in Oslo."),
                AIMessage("Bring a coat."),
            ]
        ),
        seen=[],
    )
    async with AsyncEbbtide(ebbtide_url) as ebbtide:
        hook = async_pre_model_hook(ebbtide, model="gpt-4o")
        agent = create_react_agent(
            model, [lookup], pre_model_hook=hook, checkpointer=InMemorySaver()
        )
        config = thread("lg")
        await agent.ainvoke({"messages": [("user", "Weather in Oslo?")]}, config)
        final = await agent.ainvoke({"messages": [("user", "What should I wear?")]}, config)
        status = await ebbtide.status(config["configurable"]["thread_id"])

    assert final["messages"][-1].content == "Bring a coat."
    assert len(model.seen) == 3
    assert [m.type for m in model.seen[1]] == ["human", "ai", "tool"]
    assert model.seen[2][-1].content == "What should I wear?"
    assert status.turns == 3
    # the whole history each call, stored once: the state's messages and no more
    assert status.counts.window_messages == len(final["messages"]) - 1  # the last reply


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_sync_hook_runs_with_a_client_it_makes_for_each_call(ebbtide_url: str) -> None:
    from langgraph.prebuilt import create_react_agent

    model = ScriptedChatModel(messages=iter([AIMessage("Hello."), AIMessage("Bye.")]), seen=[])
    session = f"lg-sync-{uuid.uuid4().hex[:8]}"
    hook = pre_model_hook(ebbtide_url, model="gpt-4o", session_of=lambda config: session)
    agent = create_react_agent(model, [], pre_model_hook=hook)
    agent.invoke({"messages": [("user", "Hi")]})
    agent.invoke({"messages": [("user", "Hi"), ("ai", "Hello."), ("user", "Bye")]})
    with Ebbtide(ebbtide_url) as ebbtide:
        status = ebbtide.status(session)
    assert status.turns == 2 and status.counts.window_messages == 3
    assert [m.content for m in model.seen[1]] == ["Hi", "Hello.", "Bye"]
