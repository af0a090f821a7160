"""The framework adapters (ebbtide/langgraph.py, ebbtide/pydantic_ai.py): a short conversation
with a tool call runs through each framework with a scripted model, every model call's
context comes from Ebbtide, and the framework's whole history is stored once."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ebbtide.client import AsyncEbbtide, Ebbtide
from ebbtide.langgraph import async_pre_model_hook, pre_model_hook, thread_session
from ebbtide.pydantic_ai import from_openai, history_processor, to_openai
from tests.api.live import LiveServer


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's fake chat model, keeping what each call was given; tools bind to it."""

    seen: list[list[BaseMessage]] = []  # noqa: RUF012 (pydantic field default, copied)

    def bind_tools(self, tools: Any, **_: Any) -> ScriptedChatModel:
        return self

    async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return await super()._agenerate(messages, *args, **kwargs)


@tool
def lookup(city: str) -> str:
    """The weather in a city."""
    return f"4 °C and rain in {city}"


# create_react_agent moved to `langchain.agents` in LangGraph 1.0; its pre_model_hook is the
# hook point the issue names, and it stays until LangGraph 2.0.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
async def test_a_langgraph_agent_gets_its_model_input_from_ebbtide(
    client: httpx.AsyncClient,
) -> None:
    ebbtide = AsyncEbbtide("http://ebbtide.test", http=client)
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
    hook = async_pre_model_hook(ebbtide, model="gpt-4o")
    agent = create_react_agent(model, [lookup], pre_model_hook=hook, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "lg-1"}}
    await agent.ainvoke({"messages": [("user", "Weather in Oslo?")]}, config)
    final = await agent.ainvoke({"messages": [("user", "What should I wear?")]}, config)

    assert final["messages"][-1].content == "Bring a coat."
    assert len(model.seen) == 3
    assert [m.type for m in model.seen[1]] == ["human", "ai", "tool"]
    assert model.seen[2][-1].content == "What should I wear?"
    status = await ebbtide.status("lg-1")
    assert status.turns == 3
    # the whole history each call, stored once: the state's messages and no more
    assert status.counts.window_messages == len(final["messages"]) - 1  # the last reply
    with pytest.raises(ValueError, match="thread_id"):
        thread_session({"configurable": {}})


class SyncScriptedChatModel(ScriptedChatModel):
    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_sync_hook_runs_against_a_live_server_with_a_key(
    keys_and_server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, keys = keys_and_server
    model = SyncScriptedChatModel(messages=iter([AIMessage("Hello."), AIMessage("Bye.")]), seen=[])
    with Ebbtide(live.base, api_key=keys["default"]) as ebbtide:
        hook = pre_model_hook(ebbtide, model="gpt-4o", session_of=lambda config: "lg-sync")
        agent = create_react_agent(model, [], pre_model_hook=hook)
        agent.invoke({"messages": [("user", "Hi")]})
        agent.invoke({"messages": [("user", "Hi"), ("ai", "Hello."), ("user", "Bye")]})
        status = ebbtide.status("lg-sync")
    assert status.turns == 2 and status.counts.window_messages == 3
    assert [m.content for m in model.seen[1]] == ["Hi", "Hello.", "Bye"]


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls the tool once per question, then answers with what it returned."""
    last = messages[-1]
    returned = [p for p in last.parts if isinstance(p, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart(f"Forecast: {returned[0].content}")])
    return ModelResponse(
        parts=[ToolCallPart("forecast", {"city": "Oslo"}, f"call_{len(messages)}")]
    )


async def test_a_pydantic_ai_agent_gets_its_history_from_ebbtide(client: httpx.AsyncClient) -> None:
    ebbtide = AsyncEbbtide("http://ebbtide.test", http=client)
    seen: list[list[ModelMessage]] = []

    def model_call(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        return scripted(messages, info)

    agent = Agent(
        FunctionModel(model_call),
        instructions="Answer with the forecast.",
        capabilities=[ProcessHistory(history_processor(ebbtide, "pa-1", model="gpt-4o"))],
    )

    @agent.tool_plain
    def forecast(city: str) -> str:
        return f"sunny in {city}"

    first = await agent.run("Weather in Oslo?")
    assert first.output == "Forecast: sunny in Oslo"
    second = await agent.run("And tomorrow?", message_history=first.all_messages())
    assert second.output == "Forecast: sunny in Oslo"
    assert len(seen) == 4
    status = await ebbtide.status("pa-1")
    assert status.turns == 4
    stored = to_openai(second.all_messages()[:-1])
    assert status.counts.window_messages == len(stored)


def test_messages_cross_between_pydantic_ai_and_chat_completions() -> None:
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(["look", "here"])]),
        ModelResponse(parts=[TextPart("On it."), ToolCallPart("f", '{"a": 1}', "c1")]),
        ModelRequest(parts=[ToolReturnPart("f", {"ok": True}, "c1")]),
        ModelResponse(parts=[]),
    ]
    openai = to_openai(history)
    assert openai == [
        {"role": "user", "content": "look\nhere"},
        {
            "role": "assistant",
            "content": "On it.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"ok":true}'},
        {"role": "assistant", "content": ""},
    ]
    back = from_openai(
        [
            {"role": "system", "content": "notes"},
            *openai,
            {"role": "user", "content": [{"type": "text", "text": "and?"}]},
            {"role": "tool", "tool_call_id": "unknown", "content": None},
        ]
    )
    assert [type(m).__name__ for m in back] == [
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
    ]
    assert isinstance(back[2], ModelRequest)
    returned = back[2].parts[0]
    assert isinstance(returned, ToolReturnPart) and returned.tool_name == "f"
    assert back[-1].parts[0].content == "and?"  # type: ignore[union-attr]
