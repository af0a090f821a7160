"""One caller's huge proxy call against everyone else, for docs/RELIABILITY.md: while tenant
`heavy` sends one whole-history proxy call of `--messages` messages, how long `/healthz` and
tenant `quiet`'s ordinary turns take, beside the same figures with the server idle; and the
server's resident memory before, at its peak and after the call (with the query embedder
loaded before it by one recall, as in any server that has answered one; `--cold` leaves it
to the call).

    python scripts/measure_stall.py --messages 20000 --out docs/reliability/stall.md

One run, on loopback: the embedded Postgres, `ebbtide serve` with API keys on (two tenants),
a scripted upstream that answers at once. `/healthz` is polled every `--poll-ms`; the quiet
tenant posts one short turn after another (its session holds a few earlier turns). The idle
phase lasts `--idle-s`; the loaded phase lasts as long as the heavy call. Memory is the
server process's own (its embedding worker is a child of its own, busy after the call with
the offloaded chunks; its figure is printed apart). Then the same call is sent `--repeat`
times more, alone, each to a new session, and the memory read after each: what a first
call leaves apart from what every call would.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from app.bench.servers import create_key, descendants, rss_mib, scratch_database, serving
from app.bench.upstream import ScriptedUpstream, serve_in_thread
from app.core.stats import percentiles

VOCABULARY = (
    "the pipeline reads each shard checks its schema against registry writes rejects to a "
    "quarantine table reports counts per region before nightly cut invoice budget carrier "
    "warehouse supplier rollout freeze meeting deadline contract renewal customer ticket "
    "migration replica failover latency dashboard alert owner review release branch"
).split()


QUIET_SESSIONS = 8
TURN_EVERY_S = 0.25


def history(messages: int, seed: int = 7) -> list[dict[str, str]]:
    """A long conversation of about 840 characters a message (20,000 of them: about 17 MB)."""
    rng = random.Random(seed)
    turns = []
    for i in range(messages):
        words = " ".join(rng.choice(VOCABULARY) for _ in range(118))
        turns.append(
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"Step {i}, ticket T-{rng.randint(1000, 9999)}: {words}.",
            }
        )
    return turns


@dataclass
class Samples:
    healthz_ms: list[float] = field(default_factory=list)
    quiet_turn_ms: list[float] = field(default_factory=list)
    # The quiet turns' own stage timings (the answer's timings_ms), by stage.
    quiet_stages_ms: dict[str, list[float]] = field(default_factory=dict)
    # (seconds into the phase when sent, milliseconds): where in the call the slow ones fall.
    quiet_timeline: list[tuple[float, float]] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    statuses: dict[int, int] = field(default_factory=dict)

    def count(self, status: int) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1

    def figures(self) -> dict[str, object]:
        def of(values: list[float]) -> dict[str, float]:
            return {**percentiles(values), "max": round(max(values, default=0.0), 1)}

        return {
            "healthz": of(self.healthz_ms),
            "quiet_turn": of(self.quiet_turn_ms),
            "quiet_stages_p50": {
                stage: percentiles(values)["p50"]
                for stage, values in sorted(self.quiet_stages_ms.items())
            },
            "statuses": self.statuses,
            "quiet_turn_by_5_s": by_five_seconds(self.quiet_timeline),
        }


def by_five_seconds(timeline: list[tuple[float, float]]) -> list[dict[str, float]]:
    """The quiet turns by when they were sent, 5 s at a time: where in the call the slow
    ones fall (its writes come last)."""
    spans: dict[int, list[float]] = {}
    for sent, ms in timeline:
        spans.setdefault(int(sent // 5) * 5, []).append(ms)
    return [
        {"from_s": start, "n": len(values), **percentiles(values), "max": round(max(values), 1)}
        for start, values in sorted(spans.items())
    ]


async def timed(
    samples: list[float], statuses: Samples, request: Awaitable[httpx.Response]
) -> httpx.Response | None:
    started = time.perf_counter()
    answer = None
    try:
        answer = await request
        statuses.count(answer.status_code)
    except httpx.HTTPError:
        statuses.count(0)
    samples.append((time.perf_counter() - started) * 1000)
    return answer


async def open_loop(
    every_s: float, stop: asyncio.Event, fire: Callable[[int], Awaitable[None]]
) -> None:
    """Fires a request every `every_s` whether or not the earlier ones have been answered (as
    independent clients do), so a stalled server shows in every request that waits, not in
    one; then waits for the last ones."""
    tasks: set[asyncio.Task[None]] = set()
    sent = 0
    while not stop.is_set():
        task = asyncio.create_task(fire(sent))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        sent += 1
        await asyncio.sleep(every_s)
    await asyncio.gather(*tasks)


@dataclass
class HeavyCall:
    status: int | None = None
    seconds: float | None = None
    error: str | None = None


def send_heavy(
    base: str,
    key: str,
    raw: bytes,
    outcome: HeavyCall,
    done: threading.Event | None,
    session: str = "heavy",
) -> None:
    headers = {
        "X-Ebbtide-Key": key,
        "Authorization": "Bearer sk-upstream",
        "Content-Type": "application/json",
        "X-Ebbtide-Session": session,
    }
    started = time.perf_counter()
    try:
        with httpx.Client(base_url=base, timeout=3600) as client:
            outcome.status = client.post(
                "/v1/chat/completions", content=raw, headers=headers
            ).status_code
    except httpx.HTTPError as error:
        outcome.error = type(error).__name__
    outcome.seconds = time.perf_counter() - started
    if done is not None:
        done.set()


async def sample_phase(
    base: str, quiet_key: str, poll_ms: float, until: asyncio.Future[None] | float
) -> Samples:
    """Probes `/healthz` every `poll_ms` and posts a quiet turn every `turn_ms` (to one of
    `QUIET_SESSIONS` in turn, so that turns do not queue on one session's lock) until `until`
    (a number of seconds, or a future)."""
    samples, stop = Samples(), asyncio.Event()
    rng = random.Random(11)
    headers = {"Authorization": f"Bearer {quiet_key}"}
    limits = httpx.Limits(max_connections=400)
    async with (
        httpx.AsyncClient(base_url=base, timeout=900, limits=limits) as probe,
        httpx.AsyncClient(base_url=base, timeout=900, headers=headers, limits=limits) as quiet,
    ):

        async def healthz(_: int) -> None:
            await timed(samples.healthz_ms, samples, probe.get("/healthz"))

        async def turn(i: int) -> None:
            words = " ".join(rng.choice(VOCABULARY) for _ in range(40))
            body = {"messages": [{"role": "user", "content": f"What about {words}?"}]}
            path = f"/sessions/quiet-{i % QUIET_SESSIONS}/turn"
            sent = time.perf_counter() - samples.started
            answer = await timed(samples.quiet_turn_ms, samples, quiet.post(path, json=body))
            samples.quiet_timeline.append((sent, samples.quiet_turn_ms[-1]))
            if answer is not None and answer.status_code == 200:
                for stage, ms in answer.json()["timings_ms"].items():
                    samples.quiet_stages_ms.setdefault(stage, []).append(ms)

        tasks = [
            asyncio.create_task(open_loop(poll_ms / 1000, stop, healthz)),
            asyncio.create_task(open_loop(TURN_EVERY_S, stop, turn)),
        ]
        if isinstance(until, float):
            await asyncio.sleep(until)
        else:
            await until
        stop.set()
        await asyncio.gather(*tasks)
    return samples


async def run(
    base: str, pid: int, keys: dict[str, str], args: argparse.Namespace
) -> dict[str, object]:
    headers = {"Authorization": f"Bearer {keys['quiet']}"}
    async with httpx.AsyncClient(base_url=base, timeout=600, headers=headers) as quiet:
        for session in range(QUIET_SESSIONS):  # each quiet session has a little history
            for i in range(3):
                text = f"note {i}: " + " ".join(VOCABULARY[:30])
                body = {"model": "gpt-4o", "messages": [{"role": "user", "content": text}]}
                path = f"/sessions/quiet-{session}/turn"
                (await quiet.post(path, json=body)).raise_for_status()
        if not args.cold:
            # A server in service has embedded a query: its embedding model's pages (about
            # 20 MiB of its memory) are in before the call, not counted as what the call left.
            recall = {"query": "What did we note about the replica failover?"}
            (await quiet.post("/sessions/quiet-0/recall", json=recall)).raise_for_status()
    raw = json.dumps({"model": "gpt-4o", "messages": history(args.messages)}).encode()
    # This process is the instrument: its own collector's pauses (the history it built is
    # a few hundred thousand objects) would show as the server's latency.
    gc.collect()
    gc.freeze()
    gc.disable()
    idle = await sample_phase(base, keys["quiet"], args.poll_ms, float(args.idle_s))
    memory_before = rss_mib(pid, children=False)
    outcome, done = HeavyCall(), threading.Event()
    loop = asyncio.get_running_loop()
    finished: asyncio.Future[None] = loop.create_future()
    peak = [memory_before]

    def watch() -> None:
        while not done.wait(0.5):
            peak[0] = max(peak[0], rss_mib(pid, children=False))
        loop.call_soon_threadsafe(finished.set_result, None)

    threading.Thread(target=send_heavy, args=(base, keys["heavy"], raw, outcome, done)).start()
    threading.Thread(target=watch).start()
    loaded = await sample_phase(base, keys["quiet"], args.poll_ms, finished)
    await asyncio.sleep(args.settle_s)
    memory_after = rss_mib(pid, children=False)
    children = round(sum(rss_mib(child) for child in descendants(pid)), 1)
    repeated = []
    for n in range(1, args.repeat + 1):  # the same call again, nobody else sending
        again = HeavyCall()
        fresh_session = f"heavy-again-{n}"
        await asyncio.to_thread(send_heavy, base, keys["heavy"], raw, again, None, fresh_session)
        await asyncio.sleep(args.settle_s)
        repeated.append({**again.__dict__, "after": rss_mib(pid, children=False)})
    return {
        "messages": args.messages,
        "body_mb": round(len(raw) / 1e6, 1),
        "query_embedder_warm": not args.cold,
        "heavy": outcome.__dict__,
        "idle": idle.figures(),
        "loaded": loaded.figures(),
        "memory_mib": {
            "before": memory_before,
            "peak": peak[0],
            "after": memory_after,
            "children_after": children,
            "after_each_repeat": repeated,
        },
    }


def report(figures: dict[str, object]) -> str:
    idle, loaded = figures["idle"], figures["loaded"]
    heavy, memory = figures["heavy"], figures["memory_mib"]
    assert isinstance(idle, dict) and isinstance(loaded, dict)
    assert isinstance(heavy, dict) and isinstance(memory, dict)

    def row(name: str, key: str) -> str:
        a, b = idle[key], loaded[key]
        return (
            f"| {name} | {a['n']} | {a['p50']:.1f} / {a['p95']:.1f} / {a['p99']:.1f} / "
            f"{a['max']:.0f} | {b['n']} | {b['p50']:.1f} / {b['p95']:.1f} / {b['p99']:.1f} / "
            f"{b['max']:.0f} | "
            f"{b['p95'] / a['p95']:.2f}× |"
        )

    change = (memory["after"] - memory["before"]) / memory["before"] * 100
    return "\n".join(
        [
            f"One proxy call of {figures['messages']:,} messages ({figures['body_mb']} MB) from "
            f"tenant `heavy`: status {heavy['status'] or heavy['error']}, "
            f"{heavy['seconds']:.1f} s. Milliseconds, p50 / p95 / p99 / max; requests sent "
            "at a fixed rate whether or not the earlier ones were answered.",
            "",
            "| requests | n idle | idle | n loaded | during the call | p95 ratio |",
            "| --- | --- | --- | --- | --- | --- |",
            row("`GET /healthz`", "healthz"),
            row("tenant `quiet`'s turn", "quiet_turn"),
            "",
            f"Statuses idle {idle['statuses']}, loaded {loaded['statuses']}.",
            "",
            "The quiet turn's own stage timings, p50 ms (the server's `timings_ms`; `total` is "
            "the server's time from the read, so the rest of the turn's time above is spent "
            "before the turn starts: HTTP, the body, the event loop's queue):",
            "",
            "| stage | idle | during the call |",
            "| --- | --- | --- |",
            *(
                f"| {stage} | {idle['quiet_stages_p50'].get(stage, 0):.1f} | {ms:.1f} |"
                for stage, ms in loaded["quiet_stages_p50"].items()
            ),
            "",
            f"Server memory (MiB, its own process; {warmth(figures)}): {memory['before']} "
            f"before, {memory['peak']} "
            f"at the peak, {memory['after']} after ({change:+.1f} %); its children "
            f"(the embedding worker) {memory['children_after']} after.",
            "",
            *repeats(memory),
        ]
    )


def warmth(figures: dict[str, object]) -> str:
    if figures["query_embedder_warm"]:
        return "the query embedder loaded before, by one recall"
    return "from cold: the call is the first to embed a query"


def repeats(memory: dict[str, object]) -> list[str]:
    """The same call sent again (to a new session each time, nobody else sending): whether
    what stays after it is a first call's cost or grows with every call."""
    after_each = memory["after_each_repeat"]
    assert isinstance(after_each, list)
    if not after_each:
        return []
    before = memory["before"]
    assert isinstance(before, float)
    rows = [
        f"| {n} | {call['status'] or call['error']} | {call['seconds']:.1f} | {call['after']} | "
        f"{(call['after'] - before) / before * 100:+.1f} % |"
        for n, call in enumerate(after_each, start=2)
    ]
    return [
        "The same call again, to a new session each time, with nobody else sending:",
        "",
        "| call | status | seconds | memory after (MiB) | from before the first |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--idle-s", type=float, default=30.0)
    parser.add_argument(
        "--settle-s", type=float, default=10.0, help="wait after the call before reading memory"
    )
    parser.add_argument("--poll-ms", type=float, default=50.0)
    parser.add_argument(
        "--cold",
        action="store_true",
        help="no recall before the call: the call loads the query embedder's model itself",
    )
    parser.add_argument(
        "--repeat", type=int, default=2, help="send the same call this many times more after"
    )
    parser.add_argument("--embedder", default="local", choices=["local", "hash"])
    parser.add_argument("--out", type=Path, default=Path("docs/reliability/stall.md"))
    args = parser.parse_args()
    upstream = ScriptedUpstream()
    with tempfile.TemporaryDirectory() as scratch, serve_in_thread(upstream) as upstream_base:
        url = scratch_database(Path(scratch) / "data", "measure_stall")
        keys = {tenant: create_key(url, tenant) for tenant in ("heavy", "quiet")}
        env = {"EBBTIDE_PROXY__OPENAI_BASE_URL": f"{upstream_base}/v1"}
        with serving(url, args.embedder, Path(scratch) / "serve.log", env) as server:
            figures = asyncio.run(run(server.base, server.pid, keys, args))
    text = report(figures)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(figures, indent=2) + "\n")
    print(text)


if __name__ == "__main__":
    main()
