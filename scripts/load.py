"""A bounded load run against a running Ebbtide on loopback, for docs/RELIABILITY.md.

    python scripts/load.py --url http://127.0.0.1:8765 --sessions 8 --turns 60 --window 4000

N sessions post M turns each (about 300 tokens a turn, so every session offloads and
recalls), all sessions at once, each session's turns in order. Then every posted message is
read back: it must be in the session's last prompt or verbatim in exactly one of its chunks
(fetched by id). Prints turns/s, latency percentiles, status counts and what was lost.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
import uuid
from collections import Counter

import httpx

from app.core.stats import percentiles

WORDS = (
    "order invoice warehouse shipment pallet carrier customs quota budget forecast "
    "supplier contract deadline priority region audit refund batch"
).split()
ZH = "华东仓库存订单发货物流客户合同预算审核退款批次优先级区域"


def text(rng: random.Random, words: int) -> str:
    return " ".join(
        rng.choice(WORDS) if rng.random() < 0.7 else "".join(rng.sample(ZH, 3))
        for _ in range(words)
    )


class Run:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.statuses: Counter[int] = Counter()
        self.lost = 0
        self.posted = 0


async def one_session(
    client: httpx.AsyncClient, run: Run, turns: int, window: int, seed: int, recall_every: int
) -> None:
    rng = random.Random(seed)
    session = f"load-{uuid.uuid4().hex[:10]}"
    posted: list[str] = []
    chunk_ids: list[str] = []
    prompt: list[dict[str, object]] = []
    for t in range(turns):
        messages = []
        if t:
            messages.append({"role": "assistant", "content": f"[a{t}] {text(rng, 55)}"})
        question = "what was the budget we agreed on earlier?" if t % recall_every == 0 else ""
        messages.append({"role": "user", "content": f"[u{t}] {text(rng, 110)} {question}"})
        started = time.perf_counter()
        response = await client.post(
            f"/sessions/{session}/turn",
            json={"messages": messages, "context_window": window},
            headers={"Idempotency-Key": f"{session}-{t}"},
        )
        run.latencies.append((time.perf_counter() - started) * 1000)
        run.statuses[response.status_code] += 1
        if response.status_code != 200:
            continue
        body = response.json()
        posted += [str(m["content"]) for m in messages]
        chunk_ids += body["offload"]["chunk_ids"] + body["offload"]["oversize_chunk_ids"]
        prompt = body["messages"]
    chunks = [
        (await client.get(f"/sessions/{session}/chunks/{cid}")).json()["raw_text"]
        for cid in chunk_ids
    ]
    window_texts = {str(m.get("content")) for m in prompt}
    for message in posted:
        in_chunks = sum(message in raw for raw in chunks)
        if not (message in window_texts or in_chunks == 1):
            run.lost += 1
    run.posted += len(posted)


async def main(url: str, sessions: int, turns: int, window: int, api_key: str | None) -> int:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    run = Run()
    async with httpx.AsyncClient(base_url=url, timeout=120, headers=headers) as client:
        started = time.perf_counter()
        await asyncio.gather(
            *(
                one_session(client, run, turns, window, seed, recall_every=5)
                for seed in range(sessions)
            )
        )
        elapsed = time.perf_counter() - started
    errors = sum(n for status, n in run.statuses.items() if status >= 500)
    latency = percentiles(run.latencies)
    print("| figure | value |\n| --- | --- |")
    for name, value in [
        ("sessions × turns", f"{sessions} × {turns} (window {window})"),
        ("turns/s", f"{sessions * turns / elapsed:.1f}"),
        (
            "latency p50 / p95 / p99 (ms)",
            " / ".join(f"{latency[q]:.0f}" for q in ("p50", "p95", "p99")),
        ),
        ("responses by status", ", ".join(f"{s}: {n}" for s, n in sorted(run.statuses.items()))),
        ("5xx", errors),
        ("messages posted", run.posted),
        ("messages not recoverable", run.lost),
        ("wall time (s)", f"{elapsed:.1f}"),
    ]:
        print(f"| {name} | {value} |")
    return 0 if errors == 0 and run.lost == 0 else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--window", type=int, default=4000)
    parser.add_argument("--api-key", default=None)
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.url, args.sessions, args.turns, args.window, args.api_key)))
