"""Posts a long synthetic conversation to a running Ebbtide and checks the foundation's promises.

    python scripts/replay_turns.py --url http://127.0.0.1:8000 --turns 200 --window 8000

Each turn carries the previous assistant reply and a new user message (about 300 tokens in
all). The script checks, turn by turn, that the prompt never exceeds 0.95 × the budget, and at
the end that every posted text is recoverable verbatim: in the last prompt (the window) or in
exactly one offloaded chunk, fetched by id. It prints the figures as Markdown.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid

import httpx

WORDS_EN = [
    "order",
    "invoice",
    "warehouse",
    "shipment",
    "pallet",
    "carrier",
    "customs",
    "quota",
    "budget",
    "forecast",
    "supplier",
    "contract",
    "deadline",
    "priority",
    "region",
    "audit",
    "refund",
    "batch",
]
WORDS_ZH = list("华东仓库存订单发货物流客户合同预算审核退款批次优先级区域")


def sentence(rng: random.Random, words: int) -> str:
    parts = [
        rng.choice(WORDS_EN) if rng.random() < 0.7 else "".join(rng.sample(WORDS_ZH, 3))
        for _ in range(words)
    ]
    return " ".join(parts)


def run(url: str, turns: int, window: int, seed: int) -> int:
    rng = random.Random(seed)
    session = f"replay-{uuid.uuid4().hex[:8]}"
    posted: list[str] = []
    chunk_ids: list[str] = []
    worst_ratio, worst_tokens, offloads, levels = 0.0, 0, 0, {}
    latencies: list[float] = []
    last_prompt: list[dict[str, object]] = []
    with httpx.Client(base_url=url, timeout=60) as client:
        for t in range(turns):
            messages = []
            if t:
                messages.append({"role": "assistant", "content": f"[a{t}] {sentence(rng, 55)}"})
            messages.append({"role": "user", "content": f"[u{t}] {sentence(rng, 110)}"})
            started = time.perf_counter()
            response = client.post(
                f"/sessions/{session}/turn", json={"messages": messages, "context_window": window}
            )
            latencies.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
            body = response.json()
            posted += [str(m["content"]) for m in messages]
            usage = body["usage"]
            ratio = usage["prompt_tokens"] / usage["budget"]
            worst_ratio, worst_tokens = (
                max(worst_ratio, ratio),
                max(worst_tokens, usage["prompt_tokens"]),
            )
            levels[usage["level"]] = levels.get(usage["level"], 0) + 1
            offloads += body["offload"]["triggered"]
            chunk_ids += body["offload"]["chunk_ids"]
            last_prompt = body["messages"]
            if ratio > 0.95:
                print(f"turn {t}: prompt {usage['prompt_tokens']} > 0.95 × {usage['budget']}")
                return 1
        chunks = {
            cid: client.get(f"/sessions/{session}/chunks/{cid}").json()["raw_text"]
            for cid in chunk_ids
        }
        status = client.get(f"/sessions/{session}/status").json()
    window_texts = {str(m.get("content")) for m in last_prompt}
    in_window = sum(text in window_texts for text in posted)
    in_one_chunk = sum(
        text not in window_texts and sum(text in raw for raw in chunks.values()) == 1
        for text in posted
    )
    lost = len(posted) - in_window - in_one_chunk
    latencies.sort()
    print("| figure | value |\n| --- | --- |")
    for name, value in [
        ("turns posted", turns),
        ("messages posted", len(posted)),
        ("context_window / budget", f"{window} / {status['budget']}"),
        ("offloads triggered", offloads),
        ("chunks written", len(chunk_ids)),
        ("turns by level at start", ", ".join(f"{k} {v}" for k, v in sorted(levels.items()))),
        ("max prompt_tokens", worst_tokens),
        ("max prompt_tokens / budget", f"{worst_ratio:.3f} (limit 0.95)"),
        ("messages in the final window", in_window),
        ("messages verbatim in exactly one chunk", in_one_chunk),
        ("messages not recoverable", lost),
        (
            "client latency p50 / p95 (ms)",
            f"{statistics.median(latencies):.1f} / {latencies[int(0.95 * len(latencies))]:.1f}",
        ),
    ]:
        print(f"| {name} | {value} |")
    return 0 if lost == 0 and offloads > 0 else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--window", type=int, default=8000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sys.exit(run(args.url, args.turns, args.window, args.seed))


if __name__ == "__main__":
    main()
