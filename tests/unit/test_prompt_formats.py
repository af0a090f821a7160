"""The three prompt formats pass the checks their providers apply (app/core/assemble.py).

Anthropic's rules are checked against the SDK's request types and the Messages API's
documented rules; `openai-single-system` against the chat template Qwen ships with
Qwen3.5 / 3.6 (tests/data), rendered by jinja2 as serving stacks render it.
"""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import jinja2
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment
from mistral_common.integrations.chat_templates.chat_templates import generate_chat_template
from mistral_common.tokens.tokenizers.base import TokenizerVersion

from app.core.assemble import (
    CACHE_BREAKPOINT,
    MAX_CACHE_BREAKPOINTS,
    NOTES_HEADER,
    RECALL_HEADER,
    Prompt,
    PromptFormat,
    PromptParts,
    assemble,
)
from app.core.formats import SystemPrompt, read_posted
from app.core.formats.anthropic import ARCHIVED_OPENING, SYSTEM_NOTE
from app.core.messages import Format
from app.core.types import RecalledText, WindowMessage
from tests.builders import T0
from tests.sdk_types import ANTHROPIC_MESSAGE, ANTHROPIC_SYSTEM_BLOCK, OPENAI_MESSAGE, all_conform

QWEN_TEMPLATE = (Path(__file__).parent.parent / "data" / "qwen3_6_chat_template.jinja").read_text()
RECALLED = f"{RECALL_HEADER}\n[2026-03-12 | turn 2-3 | c1]\nthe budget is 40k"

# A window after an offload: it opens with the model's reply, holds a tool loop, an
# instruction said mid-conversation, and this turn's question.
WINDOW: list[tuple[int, dict[str, Any]]] = [
    (4, {"role": "assistant", "content": "Noted, I will keep the budget in mind."}),
    (5, {"role": "user", "content": "Find flights to Lisbon."}),
    (
        5,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "flights", "arguments": '{"to": "LIS"}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "prices", "arguments": "{}"}},
            ],
        },
    ),
    (5, {"role": "tool", "tool_call_id": "c1", "content": "TP1350 at 09:10"}),
    (5, {"role": "tool", "tool_call_id": "c2", "content": "EUR 180"}),
    (5, {"role": "assistant", "content": "TP1350 at 09:10 costs EUR 180."}),
    (6, {"role": "developer", "content": "From now on answer in one line."}),
    (6, {"role": "user", "content": "Does that fit what we agreed?"}),
]


def window(rows: list[tuple[int, dict[str, Any]]] = WINDOW) -> list[WindowMessage]:
    """The rows as window messages, this turn's block on its question (the last row)."""
    items = [
        WindowMessage(seq, turn, read_posted(Format.OPENAI, raw), 10, T0)
        for seq, (turn, raw) in enumerate(rows, start=10)
    ]
    items[-1] = replace(items[-1], recalled=RecalledText(RECALLED, 20, ("c1",)))
    return items


def prompt(fmt: PromptFormat, system: SystemPrompt | None = None, **fields: Any) -> Prompt:
    values: dict[str, Any] = {
        "system": system or SystemPrompt("You plan trips."),
        "notes": "goal: a trip to Lisbon",
        "window": window(),
        "current_turn": 6,
        "format": fmt,
    }
    values.update(fields)
    return assemble(PromptParts(**values))


def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def test_anthropic_prompt_passes_the_messages_api_rules() -> None:
    out = prompt(PromptFormat.ANTHROPIC)
    assert out.system is not None and all_conform(ANTHROPIC_SYSTEM_BLOCK, out.system)
    assert out.system[0]["text"] == "You plan trips." and out.system[1]["text"].startswith(
        NOTES_HEADER
    )
    assert all_conform(ANTHROPIC_MESSAGE, out.messages)
    roles = [m["role"] for m in out.messages]
    assert roles[0] == "user" and out.messages[0]["content"] == ARCHIVED_OPENING
    assert all(a != b for a, b in itertools.pairwise(roles)), roles
    for index, message in enumerate(out.messages):
        calls = [b["id"] for b in blocks(message) if b["type"] == "tool_use"]
        if calls:
            answer = blocks(out.messages[index + 1])
            assert [b.get("tool_use_id") for b in answer[: len(calls)]] == calls


def test_anthropic_prompt_puts_the_recalled_block_inside_the_users_turn() -> None:
    out = prompt(PromptFormat.ANTHROPIC)
    last = blocks(out.messages[-1])
    texts = [b["text"] for b in last]
    assert texts[0].startswith(SYSTEM_NOTE)  # the instruction said at that point
    assert texts[-2] == RECALLED and texts[-1] == "Does that fit what we agreed?"


def test_anthropic_cache_breakpoints_mark_c0_the_earlier_turns_and_the_end() -> None:
    out = prompt(PromptFormat.ANTHROPIC)
    assert out.system is not None and out.system[-1]["cache_control"] == CACHE_BREAKPOINT
    marked = [
        (i, j)
        for i, m in enumerate(out.messages)
        for j, b in enumerate(blocks(m))
        if "cache_control" in b
    ]
    last = len(out.messages) - 1
    assert (last, len(blocks(out.messages[last])) - 1) in marked
    # The earlier turns end with the reply "TP1350 … costs EUR 180.": this turn extends that.
    earlier_end = next(
        i for i, m in enumerate(out.messages) if blocks(m)[-1].get("text", "").endswith("EUR 180.")
    )
    assert (earlier_end, len(blocks(out.messages[earlier_end])) - 1) in marked
    assert len(marked) + 1 <= MAX_CACHE_BREAKPOINTS


def test_anthropic_keeps_the_clients_system_markers_and_stays_within_four() -> None:
    marked = {"type": "text", "text": "rule", "cache_control": {"type": "ephemeral"}}
    system = SystemPrompt("rule\n\nrule\n\nrule", Format.ANTHROPIC, [marked, marked, marked])
    out = prompt(PromptFormat.ANTHROPIC, system=system)
    assert out.system is not None and out.system[:3] == [marked, marked, marked]
    on_messages = sum("cache_control" in b for m in out.messages for b in blocks(m))
    on_system = sum("cache_control" in b for b in out.system)
    # The one left marks the prompt's end: what the next turn reads back from the cache.
    assert on_system == 3 and on_messages == 1 and "cache_control" in blocks(out.messages[-1])[-1]


def template_environment() -> ImmutableSandboxedEnvironment:
    """A sandbox as serving stacks render chat templates in, `raise_exception` included."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    return env


def qwen_render(messages: list[dict[str, Any]]) -> str:
    """What vLLM and llama.cpp do: arguments as objects, then the template."""
    env = template_environment()
    env.filters["tojson"] = lambda value, **_: json.dumps(value, ensure_ascii=False)
    messages = copy.deepcopy(messages)
    for message in messages:
        for call in message.get("tool_calls") or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    template = env.from_string(QWEN_TEMPLATE)
    return template.render(messages=messages, add_generation_prompt=True)


def test_single_system_prompt_is_what_the_qwen_template_accepts() -> None:
    out = prompt(PromptFormat.OPENAI_SINGLE_SYSTEM)
    messages = out.messages
    assert all_conform(OPENAI_MESSAGE, messages)
    assert [m["role"] for m in messages].count("system") == 1 and messages[0]["role"] == "system"
    assert NOTES_HEADER in messages[0]["content"] and "You plan trips." in messages[0]["content"]
    assert messages[1] == {"role": "user", "content": ARCHIVED_OPENING}
    assert messages[-1]["content"] == f"{RECALLED}\n\nDoes that fit what we agreed?"
    rendered = qwen_render(messages)
    assert rendered.count("<|im_start|>system") == 1 and "<tool_response>\nEUR 180" in rendered
    assert rendered.endswith("<|im_start|>assistant\n<think>\n")


def test_the_openai_format_is_what_that_template_refuses() -> None:
    """The control: the check above can fail, and fails on the plain OpenAI prompt."""
    out = prompt(PromptFormat.OPENAI)
    assert [m["role"] for m in out.messages].count("system") == 3  # C0, notes, recalled
    with pytest.raises(jinja2.exceptions.TemplateError, match="must be at the beginning"):
        qwen_render(out.messages)


def test_openai_prompt_keeps_every_message_as_posted_and_recall_before_the_question() -> None:
    system = SystemPrompt("be kind", Format.OPENAI, [{"role": "developer", "content": "be kind"}])
    out = prompt(PromptFormat.OPENAI, system=system)
    assert out.messages[0] == {"role": "developer", "content": "be kind"}
    assert (
        out.messages[2:]
        == [
            {"role": "user", "content": ARCHIVED_OPENING},  # the window opens with a reply
            *(raw for _, raw in WINDOW[:-1]),
            {"role": "system", "content": RECALLED},
            WINDOW[-1][1],
        ]
    )


def test_responses_prompt_is_input_items() -> None:
    out = prompt(PromptFormat.RESPONSES)
    kinds = [m.get("type", m.get("role")) for m in out.messages]
    assert kinds[:3] == ["system", "system", "user"]
    assert out.messages[2] == {"role": "user", "content": ARCHIVED_OPENING}
    assert "function_call" in kinds and kinds.count("function_call_output") == 2
    assert out.messages[-2] == {"role": "system", "content": RECALLED}


def first_after_system(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return next(m for m in messages if m.get("role") not in ("system", "developer"))


# Windows an offload can leave: opening with the model's reply, or with its tool call.
OPENINGS = {
    "reply": WINDOW,
    "tool call": WINDOW[2:],
}


@pytest.mark.parametrize("fmt", list(PromptFormat))
@pytest.mark.parametrize("opening", list(OPENINGS))
def test_no_prompt_opens_with_the_models_turn(fmt: PromptFormat, opening: str) -> None:
    out = prompt(fmt, window=window(OPENINGS[opening]))
    first = first_after_system(out.messages)
    assert first["role"] == "user"
    assert ARCHIVED_OPENING in str(first["content"])
    opened = prompt(fmt, window=window(WINDOW[1:]))  # a window that opens with the user
    assert ARCHIVED_OPENING not in json.dumps(opened.messages)


def mistral_render(messages: list[dict[str, Any]]) -> str:
    """Mistral's chat template as mistral-common (a dependency) generates it for its v3
    tokenizer: it refuses a conversation that does not open with the user."""
    template = generate_chat_template(
        spm=False,
        tokenizer_version=TokenizerVersion.v3,
        image_support=False,
        audio_support=False,
        thinking_support=False,
        default_system_prompt=None,
        plain_thinking_support=False,
        use_special_token_variables=True,
        model_settings_fields=None,
        reasoning_effort_values=None,
        reasoning_effort_default=None,
    )
    return (
        template_environment()
        .from_string(template)
        .render(messages=messages, bos_token="<s>", eos_token="</s>", add_generation_prompt=True)
    )


# Mistral's template asks for tool call ids of nine characters: the chat without the tools.
CHAT = [row for row in WINDOW if row[1]["role"] in ("user", "assistant") and row[1]["content"]]


def test_the_single_system_prompt_is_what_mistrals_template_accepts() -> None:
    out = prompt(PromptFormat.OPENAI_SINGLE_SYSTEM, window=window(CHAT))
    rendered = mistral_render(out.messages)
    assert rendered.startswith(f"<s>[INST]{ARCHIVED_OPENING}[/INST]")
    assert rendered.rstrip().endswith("Does that fit what we agreed?[/INST]")
    qwen_render(out.messages)  # and Qwen's
    # The control: the same window without the opening line is refused.
    without = [m for m in out.messages if m.get("content") != ARCHIVED_OPENING]
    with pytest.raises(jinja2.exceptions.TemplateError, match="must start with a user message"):
        mistral_render(without)
