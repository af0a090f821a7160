"""An agent loop on Ebbtide with the OpenAI client and Ebbtide's own (`ebbtide.client`): every
turn goes through Ebbtide, which answers the prompt to send; the model may call the `memory`
tool, whose definition comes from `GET /tools/memory`. (The README shows this loop;
tests/api/test_agent_loop.py runs it.)

    python scripts/agent_loop.py --ebbtide http://127.0.0.1:8000 --session demo \\
        --model gpt-4o-mini   # OPENAI_API_KEY / OPENAI_BASE_URL as usual for the client
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator
from typing import Any

from openai import OpenAI

from ebbtide.client import Ebbtide

MAX_TOOL_ROUNDS = 4  # a model that keeps calling tools still answers within this many rounds


def run_agent(
    ebbtide: Ebbtide, llm: OpenAI, session: str, model: str, user_inputs: Iterable[str]
) -> Iterator[str]:
    """Yields the model's reply to each user input."""
    memory_tool = ebbtide.memory_tool().openai
    pending: list[dict[str, Any]] = []  # messages Ebbtide has not seen yet
    for text in user_inputs:
        pending.append({"role": "user", "content": text})
        for _ in range(MAX_TOOL_ROUNDS):
            turn = ebbtide.turn(session, pending, model=model, tools=[memory_tool])
            answer = (
                llm.chat.completions.create(
                    model=model,
                    messages=turn.messages,  # type: ignore[arg-type]
                    tools=[memory_tool],  # type: ignore[list-item]
                )
                .choices[0]
                .message
            )
            pending = [answer.model_dump(exclude_none=True)]  # sent with the next turn
            if not answer.tool_calls:
                yield answer.content or ""
                break
            for call in answer.tool_calls:  # only the memory tool is offered
                result = ebbtide.run_memory_call(session, call)
                assert result is not None, f"the model called a tool it was not given: {call}"
                pending.append(result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ebbtide", default="http://127.0.0.1:8000")
    parser.add_argument("--api-key", default=None, help="an Ebbtide key, if keys exist")
    parser.add_argument("--session", default="agent-demo")
    parser.add_argument("--model", default="gpt-4o-mini")
    args = parser.parse_args()

    def typed() -> Iterable[str]:
        while line := input("> ").strip():
            yield line

    with Ebbtide(args.ebbtide, api_key=args.api_key, timeout_s=120) as ebbtide:
        for reply in run_agent(ebbtide, OpenAI(), args.session, args.model, typed()):
            print(reply)


if __name__ == "__main__":
    main()
