"""The embedder flood of docs/RELIABILITY.md: one tenant posts long recall queries from several
clients at once while another tenant holds an ordinary conversation. Bounded in count and
time; loopback only.

    python scripts/embedder_attack.py --url http://127.0.0.1:8765 \\
        --attacker-key KEY_A --victim-key KEY_B

The victim's conversation first builds an archive (so its turns recall), then posts
`--turns` turns alone and `--turns` more while `--clients` attacker clients post
`/recall` with a `--query-chars` query in a loop. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
import uuid

import httpx

from app.core.stats import percentiles

WORDS = "ship invoice pallet budget freeze carrier rollout supplier meeting warehouse".split()


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) + str(rng.randint(0, 99)) for _ in range(words))


async def victim_turns(
    client: httpx.AsyncClient, session: str, turns: int, rng: random.Random
) -> tuple[list[float], int]:
    latencies, lexical = [], 0
    for _ in range(turns):
        body = {
            "messages": [{"role": "user", "content": f"what about {sentence(rng, 12)}?"}],
            "recall": "force",
        }
        started = time.perf_counter()
        response = await client.post(f"/sessions/{session}/turn", json=body)
        latencies.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
        lexical += response.json()["recall"]["fallback"] is not None
    return latencies, lexical


async def attacker(
    client: httpx.AsyncClient, session: str, query: str, stop: asyncio.Event
) -> tuple[list[float], int]:
    latencies, lexical = [], 0
    while not stop.is_set():
        started = time.perf_counter()
        response = await client.post(f"/sessions/{session}/recall", json={"query": query})
        latencies.append((time.perf_counter() - started) * 1000)
        if response.is_success:
            lexical += response.json()["fallback"] is not None
    return latencies, lexical


async def main(args: argparse.Namespace) -> None:
    rng = random.Random(7)
    victim_session, attack_session = f"victim-{uuid.uuid4().hex[:6]}", "flood"
    victim = httpx.AsyncClient(
        base_url=args.url, timeout=120, headers={"Authorization": f"Bearer {args.victim_key}"}
    )
    attack = httpx.AsyncClient(
        base_url=args.url,
        timeout=120,
        headers={"Authorization": f"Bearer {args.attacker_key}"},
        limits=httpx.Limits(max_connections=args.clients + 2),
    )
    async with victim, attack:
        for t in range(30):  # an archive to recall from, in a 4k window
            body = {"messages": [{"role": "user", "content": sentence(rng, 120)}]}
            if t == 0:
                body["context_window"] = 4000
            (await victim.post(f"/sessions/{victim_session}/turn", json=body)).raise_for_status()
        first = {"messages": [{"role": "user", "content": "hello"}], "model": "gpt-4o"}
        (await attack.post(f"/sessions/{attack_session}/turn", json=first)).raise_for_status()
        alone, alone_lexical = await victim_turns(victim, victim_session, args.turns, rng)
        stop = asyncio.Event()
        query = sentence(rng, args.query_chars // 8)[: args.query_chars]
        flood = [
            asyncio.create_task(attacker(attack, attack_session, query, stop))
            for _ in range(args.clients)
        ]
        await asyncio.sleep(1)  # the flood is on before the victim's turns are timed
        attacked, attacked_lexical = await victim_turns(victim, victim_session, args.turns, rng)
        stop.set()
        floods = await asyncio.gather(*flood)
    calls = [ms for latencies, _ in floods for ms in latencies]
    flood_lexical = sum(lexical for _, lexical in floods)

    def row(name: str, latencies: list[float], lexical: int) -> str:
        p = percentiles(latencies)
        return (
            f"| {name} | {p['n']} | {p['p50']:.0f} / {p['p95']:.0f} / {p['p99']:.0f} "
            f"| {lexical / max(1, p['n']):.0%} |"
        )

    print("| calls | n | ms p50 / p95 / p99 | recall went lexical |")
    print("| --- | --- | --- | --- |")
    print(row("victim turns, alone", alone, alone_lexical))
    print(row(f"victim turns, {args.clients} flooding clients", attacked, attacked_lexical))
    print(row(f"attacker recalls, {args.query_chars}-character query", calls, flood_lexical))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:8765")
    parser.add_argument("--attacker-key", required=True)
    parser.add_argument("--victim-key", required=True)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--query-chars", type=int, default=4000)
    asyncio.run(main(parser.parse_args()))
