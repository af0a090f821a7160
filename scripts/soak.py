"""A long mixed run with faults inside it, for docs/RELIABILITY.md: nothing lost, memory flat,
no 5xx outside the outages.

    python scripts/soak.py --minutes 30 --out docs/reliability/soak.md

On loopback: a Postgres of the script's own (embedded), `ebbtide serve` on it with the local
embedder and API keys on, and a scripted upstream for the proxy. `--sessions` sessions run at
once until the end: most post turns (a user message of about 110 words and the last answer,
window 4,000, so they offload; every 5th asks back, with recall forced), and now and then a
`POST /recall` or a memory-tool `offload`; every fourth session talks through the proxy
instead (whole history, Chat Completions). A third of the way in the server is killed with
SIGKILL and started again; two thirds in, Postgres is stopped and started again. Clients retry
what failed (same Idempotency-Key, or the same whole history) until it lands.

At the end every message posted is looked for in the database: in the window as posted, or
verbatim in exactly one chunk, and stored once. Memory is the server's resident set (its
process and its children) every 10 s; "flat" compares each server's last sample with its
sample 5 minutes after it started. A 5xx or a refused connection outside an outage is a
failure; inside one, the retry is the measure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

from app.bench.servers import create_key, descendants, rss_mib, scratch_database
from app.bench.upstream import ScriptedUpstream, serve_in_thread
from app.core.stats import percentiles
from app.core.types import session_key
from app.loopback import free_loopback_port, wait_until_ready
from app.store.embedded import (
    restart_embedded,
    stop_embedded,
)

WORDS = (
    "order invoice warehouse shipment pallet carrier customs quota budget forecast supplier "
    "contract deadline priority region audit refund batch rollout replica ticket"
).split()
ZH = "华东仓库存订单发货物流客户合同预算审核退款批次优先级区域"
WINDOW = 4000
RETRY_S = 0.5
TENANT = "soak"
OUTAGE_GRACE_S = 5.0


def text(rng: random.Random, words: int) -> str:
    return " ".join(
        rng.choice(WORDS) if rng.random() < 0.75 else "".join(rng.sample(ZH, 3))
        for _ in range(words)
    )


@dataclass
class Outage:
    kind: str
    started: float
    ended: float | None = None


@dataclass
class Record:
    """Every request's outcome: (monotonic time, kind, status (0: no answer), ms, cause). The
    cause of a failure is Ebbtide's error code or the client's exception name, never text."""

    calls: list[tuple[float, str, int, float, str]] = field(default_factory=list)
    outages: list[Outage] = field(default_factory=list)
    # time, server no., MiB with the embedding worker, MiB of the server's own process
    memory: list[tuple[float, int, float, float]] = field(default_factory=list)
    posted: dict[str, list[str]] = field(default_factory=dict)  # session key → texts
    orphans: list[int] = field(default_factory=list)  # children the killed server left

    def inside_outage(self, sent: float, ms: float) -> bool:
        """Whether the request was in flight during an outage (or in the moments after it,
        while the clients' pools find their connections closed)."""
        answered = sent + ms / 1000
        return any(
            sent <= (o.ended or sent) + OUTAGE_GRACE_S and answered >= o.started
            for o in self.outages
        )


class Server:
    """`ebbtide serve` as a child process the soak can kill and start again."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.log = env, log
        self.port = free_loopback_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "serve"],
                env={**self.env, "PORT": str(self.port)},
                stdout=out,
                stderr=out,
            )
        wait_until_ready(self.base, self.process, self.log)
        self.starts += 1

    def kill(self) -> list[int]:
        """SIGKILL; the children it leaves behind (there should be none), a moment later."""
        assert self.process is not None
        children = descendants(self.process.pid)
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        time.sleep(3)
        return [pid for pid in children if Path(f"/proc/{pid}").exists()]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=60)


def error_code(answer: httpx.Response) -> str:
    """A failed answer's error code and message (Ebbtide's error body: they name the problem,
    never the conversation's text), or "" for a success."""
    if answer.status_code < 500:
        return ""
    try:
        error = answer.json()["error"]
        return f"{error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        return "no error body"


async def send(
    client: httpx.AsyncClient,
    record: Record,
    kind: str,
    method: str,
    path: str,
    deadline: float,
    **kwargs: Any,
) -> httpx.Response | None:
    """The request, retried until it lands (2xx or 4xx) or the deadline passes."""
    while time.monotonic() < deadline:
        started = time.monotonic()
        try:
            answer = await client.request(method, path, **kwargs)
            status, cause = answer.status_code, error_code(answer)
        except httpx.HTTPError as error:
            answer, status, cause = None, 0, type(error).__name__
        record.calls.append((started, kind, status, (time.monotonic() - started) * 1000, cause))
        if answer is not None and status < 500:
            return answer
        await asyncio.sleep(RETRY_S)
    return None


async def turn_session(
    client: httpx.AsyncClient, record: Record, name: str, seed: int, until: float
) -> None:
    rng = random.Random(seed)
    posted = record.posted.setdefault(session_key(TENANT, name), [])
    answer_text = ""
    turn = 0
    while time.monotonic() < until:
        turn += 1
        messages = []
        if answer_text:
            messages.append({"role": "assistant", "content": answer_text})
        ask = " what was the budget we agreed on earlier?" if turn % 5 == 0 else ""
        messages.append({"role": "user", "content": f"[{name} u{turn}] {text(rng, 110)}{ask}"})
        body: dict[str, Any] = {"messages": messages, "recall": "force" if ask else "auto"}
        if turn == 1:
            body.update(model="gpt-4o", context_window=WINDOW)
        answer = await send(
            client,
            record,
            "turn",
            "POST",
            f"/sessions/{name}/turn",
            until + 600,
            json=body,
            headers={"Idempotency-Key": f"{name}-{turn}"},
        )
        if answer is None or answer.status_code != 200:
            raise RuntimeError(f"{name} turn {turn}: {answer and answer.text}")
        posted += [m["content"] for m in messages]
        answer_text = f"[{name} a{turn}] {text(rng, 50)}"
        if turn % 7 == 0:
            query = {"query": f"{rng.choice(WORDS)} {rng.choice(WORDS)}"}
            await send(
                client, record, "recall", "POST", f"/sessions/{name}/recall", until, json=query
            )
        if turn % 11 == 0:
            offload = {"type": "offload"}
            await send(
                client, record, "offload", "POST", f"/sessions/{name}/memory", until, json=offload
            )
        await asyncio.sleep(rng.uniform(0.2, 1.0))


async def proxy_session(
    client: httpx.AsyncClient, record: Record, name: str, seed: int, until: float
) -> None:
    rng = random.Random(seed)
    posted = record.posted.setdefault(session_key(TENANT, name), [])
    history: list[dict[str, Any]] = [{"role": "system", "content": "Answer briefly."}]
    headers = {
        "X-Ebbtide-Session": name,
        "X-Ebbtide-Context-Window": str(WINDOW),
        "Authorization": "Bearer sk-soak",
    }
    call = 0
    while time.monotonic() < until:
        call += 1
        history.append({"role": "user", "content": f"[{name} u{call}] {text(rng, 110)}"})
        body = {"model": "gpt-4o", "messages": history}
        answer = await send(
            client,
            record,
            "proxy",
            "POST",
            "/v1/chat/completions",
            until + 600,
            json=body,
            headers=headers,
        )
        if answer is None or answer.status_code != 200:
            raise RuntimeError(f"{name} call {call}: {answer and answer.text}")
        reply = answer.json()["choices"][0]["message"]
        posted.append(history[-1]["content"])
        history.append({"role": "assistant", "content": reply["content"]})
        await asyncio.sleep(rng.uniform(0.2, 1.0))


def flatness(series: list[tuple[float, float]]) -> dict[str, float]:
    """Memory five minutes after start (warmed up) against the last sample and the max."""
    first_t = series[0][0]
    warm = next((mib for t, mib in series if t - first_t >= 300), series[0][1])
    return {
        "after 5 min": warm,
        "last": series[-1][1],
        "max": max(mib for _, mib in series),
        "change %": round((series[-1][1] - warm) / warm * 100, 1),
    }


async def sample_memory(server: Server, record: Record, until: float) -> None:
    while time.monotonic() < until:
        process = server.process
        alive = process is not None and process.poll() is None
        mib = rss_mib(process.pid) if process is not None and alive else 0.0
        own = rss_mib(process.pid, children=False) if process is not None and alive else 0.0
        if mib > 0 and own > 0:  # a server being killed reads as nothing
            record.memory.append((time.monotonic(), server.starts, mib, own))
        await asyncio.sleep(10)


async def wait_ready(base: str, path: str = "/readyz") -> None:
    async with httpx.AsyncClient(base_url=base, timeout=5) as client:
        while True:
            try:
                if (await client.get(path)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.5)


async def faults(
    server: Server, data_dir: Path, record: Record, started: float, seconds: float
) -> list[int]:
    await asyncio.sleep(seconds / 3)
    outage = Outage("server killed (SIGKILL) and started again", time.monotonic())
    record.outages.append(outage)
    left = await asyncio.to_thread(server.kill)
    await asyncio.to_thread(server.start)
    await wait_ready(server.base)
    outage.ended = time.monotonic()
    await asyncio.sleep(max(0.0, started + 2 * seconds / 3 - time.monotonic()))
    outage = Outage("Postgres stopped and started again", time.monotonic())
    record.outages.append(outage)
    await asyncio.to_thread(stop_embedded, data_dir)
    await asyncio.sleep(10)
    await asyncio.to_thread(restart_embedded, data_dir)
    await wait_ready(server.base)
    outage.ended = time.monotonic()
    return left


async def soak(server: Server, data_dir: Path, key: str, args: argparse.Namespace) -> Record:
    record = Record()
    started = time.monotonic()
    until = started + args.minutes * 60
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(base_url=server.base, timeout=120, headers=headers) as client,
        httpx.AsyncClient(
            base_url=server.base, timeout=120, headers={"X-Ebbtide-Key": key}
        ) as proxied,
    ):
        sessions = [
            proxy_session(proxied, record, f"p{i}", i, until)
            if i % 4 == 3
            else turn_session(client, record, f"s{i}", i, until)
            for i in range(args.sessions)
        ]
        fault = asyncio.create_task(faults(server, data_dir, record, started, args.minutes * 60))
        memory = asyncio.create_task(sample_memory(server, record, until))
        await asyncio.gather(*sessions)
        record.orphans = await fault
        await memory
    return record


def lost_messages(url: str, record: Record) -> dict[str, int]:
    """Per session: texts posted but not stored exactly once (window or one chunk), and
    messages stored more than posted."""
    found = {"posted": 0, "lost": 0, "duplicated": 0}
    with psycopg.connect(url) as db:
        for key, texts in record.posted.items():
            window = [
                row[0]
                for row in db.execute(
                    "SELECT posted FROM messages WHERE session_id = %s AND state = 'window'",
                    (key,),
                )
            ]
            chunks = [
                row[0]
                for row in db.execute("SELECT raw_text FROM chunks WHERE session_id = %s", (key,))
            ]
            for said in texts:
                found["posted"] += 1
                in_window = sum(said in (posted or "") for posted in window)
                in_chunks = sum(said in raw for raw in chunks)
                if in_window + in_chunks == 0:
                    found["lost"] += 1
                elif in_window + in_chunks > 1:
                    found["duplicated"] += 1
    return found


def report(record: Record, stored: dict[str, int], args: argparse.Namespace) -> dict[str, Any]:
    by_kind: dict[str, list[float]] = {}
    statuses: Counter[str] = Counter()
    failures_outside: Counter[str] = Counter()
    for moment, kind, status, ms, cause in record.calls:
        by_kind.setdefault(kind, []).append(ms)
        statuses[f"{kind} {status}"] += 1
        if (status == 0 or status >= 500) and not record.inside_outage(moment, ms):
            failures_outside[f"{kind} {status} {cause}"] += 1
    memory: dict[str, dict[str, float]] = {}
    for number in sorted({n for _, n, _, _ in record.memory}):
        for part, column in (("", 2), (", own process", 3)):
            series = [(row[0], row[column]) for row in record.memory if row[1] == number]
            memory[f"server {number}{part}"] = flatness(series)
    return {
        "minutes": args.minutes,
        "sessions": args.sessions,
        "requests": {kind: percentiles(values) for kind, values in by_kind.items()},
        "statuses": dict(sorted(statuses.items())),
        "failures_outside_outages": sum(failures_outside.values()),
        "failures_outside_outages_by_cause": dict(sorted(failures_outside.items())),
        "outages": [
            {"what": o.kind, "seconds": round((o.ended or o.started) - o.started, 1)}
            for o in record.outages
        ],
        "children_left_by_kill": record.orphans,
        "messages": stored,
        "memory_mib": memory,
    }


def markdown(figures: dict[str, Any]) -> str:
    lines = [
        f"{figures['minutes']} minutes, {figures['sessions']} sessions at once; "
        f"{figures['messages']['posted']} messages posted, {figures['messages']['lost']} lost, "
        f"{figures['messages']['duplicated']} stored twice; "
        f"{figures['failures_outside_outages']} failed requests (5xx or no answer) outside "
        "the outages.",
        "",
        "| requests | n | p50 / p95 / p99 (ms) |",
        "| --- | --- | --- |",
    ]
    for kind, p in figures["requests"].items():
        lines.append(f"| {kind} | {p['n']} | {p['p50']:.0f} / {p['p95']:.0f} / {p['p99']:.0f} |")
    lines += ["", "| outage | seconds |", "| --- | --- |"]
    lines += [f"| {o['what']} | {o['seconds']} |" for o in figures["outages"]]
    lines += [
        "",
        "| server | MiB 5 min after start | last | max | change |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, m in figures["memory_mib"].items():
        lines.append(
            f"| {name} | {m['after 5 min']} | {m['last']} | {m['max']} | {m['change %']:+.1f} % |"
        )
    lines += [
        "",
        f"Statuses (kind, status; 0 = no answer): {figures['statuses']}.",
        "Failures outside the outages (kind, status, cause): "
        f"{figures['failures_outside_outages_by_cause'] or 'none'}.",
        f"Children the killed server left running: {figures['children_left_by_kill'] or 'none'}.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--embedder", default="local", choices=["local", "hash"])
    parser.add_argument("--out", type=Path, default=Path("docs/reliability/soak.md"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, serve_in_thread(ScriptedUpstream()) as upstream:
        data_dir = Path(scratch) / "data"
        url = scratch_database(data_dir, "soak")
        key = create_key(url, TENANT, "memory:read,memory:write,memory:offload")
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "HOST": "127.0.0.1",
            "EBBTIDE_EMBEDDER__KIND": args.embedder,
            "EBBTIDE_LOG__LEVEL": "warning",
            "EBBTIDE_PROXY__OPENAI_BASE_URL": f"{upstream}/v1",
        }
        server = Server(env, Path(scratch) / "serve.log")
        server.start()
        try:
            record = asyncio.run(soak(server, data_dir, key, args))
        finally:
            server.stop()
        figures = report(record, lost_messages(url, record), args)
    text_out = markdown(figures)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text_out)
    args.out.with_suffix(".json").write_text(json.dumps(figures, indent=2) + "\n")
    print(text_out)


if __name__ == "__main__":
    main()
