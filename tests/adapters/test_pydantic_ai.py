"""The pydantic-ai adapter (ebbtide/pydantic_ai.py) on a scripted model: the model is asked
with Ebbtide's window, and the agent's own history grows exactly as it does without Ebbtide."""

from __future__ import annotations

import json
import uuid
from typing import Any

from pydantic_ai import Agent
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

from ebbtide.client import AsyncEbbtide
from ebbtide.pydantic_ai import EbbtideWindow, from_openai, to_openai

# Long enough that a window of 2,000 tokens offloads within a few runs.
PADDING = " ".join(f"detail{n} of the itinerary" for n in range(60))
RUNS = 16
WINDOW = 2000


def question(run: int) -> str:
    return f"Question {run}: the weather in city{run}? {PADDING}"


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls the tool once per question, then answers with what it returned. Its calls are
    named by the question, not by how many messages it was shown, so that with a window and
    without one it answers the same."""
    last = messages[-1]
    returned = [p for p in last.parts if isinstance(p, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart(f"Forecast: {returned[0].content}")])
    asked = [p for p in last.parts if isinstance(p, UserPromptPart)]
    run = str(asked[-1].content).split(":")[0].split()[-1]
    return ModelResponse(parts=[ToolCallPart("forecast", {"city": f"city{run}"}, f"call_{run}")])


def content_of(history: list[ModelMessage]) -> list[tuple[str, list[tuple[str, str]]]]:
    """What a history says, without the times and ids pydantic-ai stamps on it."""
    out = []
    for message in history:
        parts = []
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                parts.append((part.part_kind, f"{part.tool_call_id} {part.args_as_json_str()}"))
            elif isinstance(part, ToolReturnPart):
                parts.append((part.part_kind, f"{part.tool_call_id} {part.model_response_str()}"))
            else:
                parts.append((part.part_kind, str(getattr(part, "content", ""))))
        out.append((message.kind, parts))
    return out


async def run_agent(capabilities: list[Any]) -> tuple[list[list[ModelMessage]], list[int], Any]:
    """RUNS runs of one conversation, each given the last one's `all_messages()`: what the
    model was shown at each request, the history's length after each run, and the last
    result."""
    shown: list[list[ModelMessage]] = []

    def model_call(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        shown.append(list(messages))
        return scripted(messages, info)

    agent = Agent(
        FunctionModel(model_call),
        instructions="Answer with the forecast.",
        capabilities=capabilities,
    )

    @agent.tool_plain
    def forecast(city: str) -> str:
        return f"sunny in {city}"

    history: list[ModelMessage] = []
    lengths = []
    result: Any = None
    for run in range(1, RUNS + 1):
        result = await agent.run(question(run), message_history=history)
        history = result.all_messages()
        lengths.append(len(history))
    return shown, lengths, result


async def test_the_agent_keeps_its_whole_history_and_the_model_sees_the_window(
    ebbtide_url: str,
) -> None:
    session = f"pa-{uuid.uuid4().hex[:8]}"
    async with AsyncEbbtide(ebbtide_url) as ebbtide:
        window = EbbtideWindow(ebbtide, session, model="gpt-4o", context_window=WINDOW)
        shown, lengths, result = await run_agent([window])
        status = await ebbtide.status(session)
    plain_shown, plain_lengths, plain = await run_agent([])

    # The agent's record is the same with Ebbtide as without: every run adds its 4 messages.
    assert lengths == plain_lengths == [4 * run for run in range(1, RUNS + 1)]
    assert content_of(result.all_messages()) == content_of(plain.all_messages())
    assert [m.output for m in (result, plain)] == ["Forecast: sunny in city16"] * 2
    # Ebbtide stored each request's history once and read no edit into it.
    assert status.turns == 2 * RUNS
    assert status.counts.superseded_messages == 0
    assert status.counts.offloaded_messages > 0
    # The model was shown Ebbtide's window: late requests see less than the history, the
    # window opens with a request (a user turn), and the newest request is the agent's own.
    assert len(shown[-1]) < len(plain_shown[-1])
    assert all(isinstance(request[0], ModelRequest) for request in shown)
    newest = shown[-1][-1]
    assert isinstance(newest, ModelRequest) and isinstance(newest.parts[-1], ToolReturnPart)
    # pydantic-ai 2.0 reads the run's instructions off the newest request it is sent.
    assert newest.instructions == plain_shown[-1][-1].instructions


async def test_a_session_can_come_from_the_run_context(ebbtide_url: str) -> None:
    session = f"pa-deps-{uuid.uuid4().hex[:8]}"
    async with AsyncEbbtide(ebbtide_url) as ebbtide:
        window = EbbtideWindow(ebbtide, lambda ctx: ctx.deps, model="gpt-4o")
        agent = Agent(
            FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("Hi.")])),
            deps_type=str,
            capabilities=[window],
        )
        result = await agent.run("Hello", deps=session)
        status = await ebbtide.status(session)
    assert result.output == "Hi." and status.turns == 1


def test_messages_cross_between_pydantic_ai_and_chat_completions() -> None:
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(["look", "here"])]),
        ModelResponse(parts=[TextPart("On it."), ToolCallPart("f", '{"a": 1}', "c1")]),
        ModelRequest(parts=[ToolReturnPart("f", {"ok": True}, "c1")]),
        ModelResponse(parts=[]),
    ]
    openai = to_openai(history)
    # pydantic-ai 2.0 passes a call's argument string on as given, later releases re-encode it
    arguments = openai[1]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(arguments) == {"a": 1}
    openai[1]["tool_calls"][0]["function"]["arguments"] = '{"a":1}'
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
