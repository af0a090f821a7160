"""An agent loop on Ebbtide with the OpenAI client: every turn goes through Ebbtide, which
answers the prompt to send; the model may call the `memory` tool, whose definition comes from
`GET /tools/memory`. (The README shows this loop; tests/api/test_agent_loop.py runs it.)

    python scripts/agent_loop.py --ebbtide http://127.0.0.1:8000 --session demo \\
        --model gpt-4o-mini   # OPENAI_API_KEY / OPENAI_BASE_URL as usual for the client
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Iterator
from typing import Any

import httpx
from openai import OpenAI

MAX_TOOL_ROUNDS = 4  # a model that keeps calling tools still answers within this many rounds


def run_agent(
    ebbtide: httpx.Client, llm: OpenAI, session: str, model: str, user_inputs: Iterable[str]
) -> Iterator[str]:
    """Yields the model's reply to each user input."""
    memory_tool = ebbtide.get("/tools/memory").json()["openai"]
    pending: list[dict[str, Any]] = []  # messages Ebbtide has not seen yet
    for text in user_inputs:
        pending.append({"role": "user", "content": text})
        for _ in range(MAX_TOOL_ROUNDS):
            turn = ebbtide.post(
                f"/sessions/{session}/turn",
                json={"messages": pending, "model": model, "tools": [memory_tool]},
            )
            turn.raise_for_status()
            answer = (
                llm.chat.completions.create(
                    model=model, messages=turn.json()["messages"], tools=[memory_tool]
                )
                .choices[0]
                .message
            )
            pending = [answer.model_dump(exclude_none=True)]  # sent with the next turn
            if not answer.tool_calls:
                yield answer.content or ""
                break
            for call in answer.tool_calls:
                result = ebbtide.post(
                    f"/sessions/{session}/memory", json=json.loads(call.function.arguments)
                ).json()
                pending.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "content": result.get("text") or json.dumps(result),  # errors too
                    }
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ebbtide", default="http://127.0.0.1:8000")
    parser.add_argument("--api-key", default=None, help="an Ebbtide key, if keys exist")
    parser.add_argument("--session", default="agent-demo")
    parser.add_argument("--model", default="gpt-4o-mini")
    args = parser.parse_args()
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}

    def typed() -> Iterable[str]:
        while line := input("> ").strip():
            yield line

    with httpx.Client(base_url=args.ebbtide, headers=headers, timeout=120) as ebbtide:
        for reply in run_agent(ebbtide, OpenAI(), args.session, args.model, typed()):
            print(reply)


if __name__ == "__main__":
    main()
