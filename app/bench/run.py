"""`ebbtide bench`: what Ebbtide adds to a turn, measured against the floor in one run.

Sections, each bounded in count and time:
1. per-turn latency (client and server stages) for never-triggered turns, steady-state turns
   that recall, and turns that offload (measured on the same conversation posted with recall
   off, so the figure is the offload's own cost; the steady session's offloading turns, which
   also recall, are reported beside it); the floor (`POST /bench/floor/{id}`: store the
   messages, return them) is posted alternately with the never-triggered turns; then the
   database round trips per turn and the embedding lag, read from the server's /metrics;
2. per-turn cost along one session's history (turn 10 … 5,000);
3. recall search latency (query embedding excluded) with 1k … 100k chunks in one session,
   loaded with COPY;
4. throughput at 1 … 64 concurrent sessions, with the server's peak RSS, the embedding
   queue's peak depth, the time it takes to drain after the level, and the worker's words/s;
5. local embedder cost: queries, and passages by batch size.

Sections 1 and 4 run on a real `ebbtide serve` with the local embedder (the default); 2 on one
with the hash embedder, so that it shows Ebbtide's own cost as history grows (embedding cost
does not depend on history and is section 5); 3 and 5 in this process against the same
embedded Postgres. Every server listens on 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from app.bench.report import markdown
from app.bench.servers import Server, rss_mib, serving
from app.core.ports import Progress, no_progress
from app.core.stats import percentiles
from app.store.database import libpq_url
from app.store.embedded import drop_database, fresh_database, start_embedded


def _vocabulary(size: int) -> list[str]:
    """English words that are one token each in cl100k (so N words are about N tokens, as in
    conversation), in the tokenizer's own order, which roughly follows frequency."""
    import tiktoken

    from app.providers.tokenizer import DEFAULT_ENCODING

    encoding = tiktoken.get_encoding(DEFAULT_ENCODING)
    words: list[str] = []
    for token in range(encoding.n_vocab):
        try:
            text = encoding.decode_single_token_bytes(token).decode()
        except (KeyError, UnicodeDecodeError):
            continue
        if text.startswith(" ") and text[1:].isalpha() and text[1:].islower() and len(text) > 4:
            words.append(text[1:])
        if len(words) == size:
            break
    return words


VOCABULARY = _vocabulary(4000)
# Zipf weights: a few words are everywhere, most are rare, as in conversation (a short fixed
# list would put every term in every chunk and make lexical search look pathological).
ZIPF_WEIGHTS = [1.0 / rank for rank in range(1, len(VOCABULARY) + 1)]
TURN_TIMEOUT_S = 120
DRAIN_LIMIT_S = 900  # the embedding queue is waited for at most this long after a section


@dataclass(frozen=True)
class BenchConfig:
    warm_up_turns: int = 30  # load the embedder, fill the pools
    latency_turns: int = 200
    steady_warm_up_turns: int = 40  # until the steady session has an archive to search
    steady_turns: int = 200
    history_points: tuple[int, ...] = (10, 100, 1000, 5000)
    history_window: int = 10  # turns measured from each point on
    # 250,000 chunks hold 1,000,000 units (`archive.UNITS_PER_CHUNK` each): the full form's
    # largest archive, which has a target of its own.
    archive_sizes: tuple[int, ...] = (1_000, 10_000, 100_000, 250_000)
    archive_queries: int = 200
    concurrency: tuple[int, ...] = (1, 4, 16, 64)
    session_turns: int = 12
    embed_reps: int = 30
    seed: int = 7

    @classmethod
    def quick(cls) -> BenchConfig:
        return cls(
            latency_turns=30,
            steady_turns=40,
            history_points=(10, 100, 300),
            history_window=6,
            archive_sizes=(1_000, 5_000),
            archive_queries=50,
            concurrency=(1, 4),
            session_turns=8,
            embed_reps=5,
        )


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(VOCABULARY, weights=ZIPF_WEIGHTS, k=words))


@dataclass
class Timed:
    client_ms: float
    server: dict[str, float]
    offloaded: bool
    recalled: bool
    searched: bool  # recall searched the archive (it was there, recall not off)


async def post_turn(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> Timed:
    started = time.perf_counter()
    response = await client.post(path, json=body)
    elapsed = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    data = response.json()
    return Timed(
        client_ms=elapsed,
        server=data.get("timings_ms", {}),
        offloaded=bool(data.get("offload", {}).get("triggered")),
        recalled=bool(data.get("recall", {}).get("hits")),
        searched="recall_search" in data.get("timings_ms", {}),
    )


def turn_body(rng: random.Random, t: int, window: int, words: int, recall: str) -> dict[str, Any]:
    messages = []
    if t:
        messages.append({"role": "assistant", "content": f"[a{t}] {sentence(rng, words // 2)}"})
    messages.append({"role": "user", "content": f"[u{t}] {sentence(rng, words)}"})
    return {"messages": messages, "context_window": window, "recall": recall}


def _summary(samples: Sequence[Timed]) -> dict[str, Any]:
    stages = sorted({k for s in samples for k in s.server})
    return {
        "client_ms": percentiles([s.client_ms for s in samples]),
        "server_ms": {
            k: percentiles([s.server[k] for s in samples if k in s.server]) for k in stages
        },
    }


# --- reading the server's /metrics -------------------------------------------------------------


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(client: httpx.AsyncClient) -> Samples:
    """Every sample of the server's /metrics, by name and labels."""
    from prometheus_client.parser import text_string_to_metric_families

    response = await client.get("/metrics")
    response.raise_for_status()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def _value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def round_trips_per_turn(before: Samples, after: Samples) -> dict[str, float]:
    """Mean database round trips per turn, by kind of turn (`ebbtide_turn_db_statements`)."""

    def grown(series: str, kind: str) -> float:
        name = f"ebbtide_turn_db_statements_{series}"
        return _value(after, name, kind=kind) - _value(before, name, kind=kind)

    kinds = ("floor", "quiet", "recall", "offload")
    return {k: round(grown("sum", k) / grown("count", k), 2) for k in kinds if grown("count", k)}


def histogram_quantile(samples: Samples, name: str, quantile: float) -> float | None:
    """The quantile of a histogram, linear within its bucket (as Prometheus estimates it)."""
    buckets = sorted(
        (float(dict(labels)["le"]), value)
        for (sample, labels), value in samples.items()
        if sample == f"{name}_bucket"
    )
    if not buckets or buckets[-1][1] == 0:
        return None
    rank = quantile * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return lower_bound
            share = (rank - lower_count) / max(count - lower_count, 1e-9)
            return round(lower_bound + (bound - lower_bound) * share, 3)
        lower_bound, lower_count = bound, count
    return lower_bound


async def queue_depth(server: Server) -> int:
    """Chunks waiting for vectors, counted in the server's database (the gauge is only as
    fresh as the worker's last batch)."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(libpq_url(server.database_url)) as connection:
        cursor = await connection.execute(
            "SELECT count(*) FROM chunks WHERE needs_embedding AND superseded_turn IS NULL"
        )
        found = await cursor.fetchone()
    return int(found[0]) if found else 0


async def until_drained(server: Server, limit_s: float) -> float | None:
    """Seconds until the embedding queue is empty (None: not within `limit_s`)."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        if await queue_depth(server) == 0:
            return round(time.monotonic() - started, 1)
        await asyncio.sleep(0.5)
    return None


def embedding_lag(samples: Samples) -> dict[str, Any]:
    """From a chunk's write to its vectors': how many, the mean and estimated quantiles (s)."""
    name = "ebbtide_embedding_lag_seconds"
    count = _value(samples, f"{name}_count")
    return {
        "chunks": int(count),
        "mean_s": round(_value(samples, f"{name}_sum") / count, 3) if count else None,
        "p50_s": histogram_quantile(samples, name, 0.5),
        "p95_s": histogram_quantile(samples, name, 0.95),
    }


# --- 1. per-turn latency against the floor ------------------------------------------------------


async def per_turn_latency(
    server: Server, config: BenchConfig, progress: Progress = no_progress
) -> dict[str, Any]:
    rng = random.Random(config.seed)
    stage = "bench: per-turn latency (turns)"
    steady_turns = config.steady_warm_up_turns + config.steady_turns
    progress(stage, 0, config.warm_up_turns + config.latency_turns + steady_turns)
    async with httpx.AsyncClient(base_url=server.base, timeout=TURN_TIMEOUT_S) as client:
        await _warm_up(client, rng, config.warm_up_turns)
        progress(stage, config.warm_up_turns)
        await until_drained(server, DRAIN_LIMIT_S)
        before = await scrape(client)
        never: list[Timed] = []
        floor: list[Timed] = []
        for i in range(config.latency_turns):
            session = f"never-{i // 10}"
            body = turn_body(rng, i % 10, 128_000, 80, "auto")
            floor.append(await post_turn(client, f"/bench/floor/floor-{i // 10}", body))
            never.append(await post_turn(client, f"/sessions/{session}/turn", body))
            progress(stage, 1)
        steady: list[Timed] = []
        quiet: list[Timed] = []  # the same conversation with recall off: offloads alone
        for t in range(steady_turns):
            body = turn_body(rng, t, 4000, 110, "force")
            timed = await post_turn(client, "/sessions/steady/turn", body)
            alone = await post_turn(client, "/sessions/offloads/turn", {**body, "recall": "off"})
            progress(stage, 1)
            if t >= config.steady_warm_up_turns:
                steady.append(timed)
                quiet.append(alone)
        drained_s = await until_drained(server, DRAIN_LIMIT_S)
        after = await scrape(client)
    return {
        "round_trips_per_turn": round_trips_per_turn(before, after),
        "embedding_lag": embedding_lag(after),
        "drained_after_s": drained_s,
        "floor": _summary(floor),
        "never_triggered": _summary(never),
        "never_triggered_recalls": sum(s.recalled for s in never),  # archive empty: none
        "steady_with_recall": _summary([s for s in steady if not s.offloaded]),
        "offload_turns": _summary([s for s in quiet if s.offloaded]),
        "offload_turns_with_recall": _summary([s for s in steady if s.offloaded]),
        "steady_recall_hit_share": round(sum(s.recalled for s in steady) / max(1, len(steady)), 3),
    }


async def _warm_up(client: httpx.AsyncClient, rng: random.Random, turns: int) -> None:
    """Loads the embedder and fills the connection pool before anything is timed."""
    for t in range(turns):
        await post_turn(client, "/sessions/warm-up/turn", turn_body(rng, t, 4000, 110, "force"))
        await post_turn(client, "/bench/floor/warm-up", turn_body(rng, t, 4000, 20, "auto"))


# --- 2. growth with history ---------------------------------------------------------------------


async def history_growth(
    server: Server, config: BenchConfig, progress: Progress = no_progress
) -> dict[str, Any]:
    """One session of short turns in a 1,024-token window: it offloads from about turn 8 on,
    and from then every turn searches the archive (auto mode). The figure at turn N is over
    the turns N, N+1, … (`history_window` of them) that searched and did not offload;
    `bookkeeping` is the server time without recall and embedding (reads, token accounting,
    notes, assembly, writes), the part that must not grow with history."""
    rng = random.Random(config.seed + 1)
    last = max(config.history_points) + config.history_window - 1
    by_turn: dict[int, Timed] = {}
    stage = "bench: growth with history (turns)"
    progress(stage, 0, last)
    async with httpx.AsyncClient(base_url=server.base, timeout=TURN_TIMEOUT_S) as client:
        for t in range(1, last + 1):
            by_turn[t] = await post_turn(
                client, "/sessions/history/turn", turn_body(rng, t, 1024, 40, "auto")
            )
            progress(stage, 1)
    points = {}
    for point in config.history_points:
        window = [
            by_turn[t]
            for t in range(point, point + config.history_window)
            if by_turn[t].searched and not by_turn[t].offloaded
        ]
        summary = _summary(window)
        bookkeeping = [
            s.server["total"] - s.server.get("recall", 0.0) - s.server.get("embed", 0.0)
            for s in window
        ]
        points[str(point)] = {
            "server_total_ms_p50": summary["server_ms"].get("total", {}).get("p50", 0.0),
            "bookkeeping_ms_p50": percentiles(bookkeeping)["p50"],
            "recall_ms_p50": summary["server_ms"].get("recall", {}).get("p50", 0.0),
            "client_ms_p50": summary["client_ms"]["p50"],
            "turns_measured": len(window),
            "server_ms": summary["server_ms"],
        }
    return {"points": points, "offloads": sum(s.offloaded for s in by_turn.values())}


# --- 3. growth with archive size ----------------------------------------------------------------


async def archive_growth(database_url: str, config: BenchConfig) -> dict[str, Any]:
    from app.bench import archive

    return await archive.measure(
        database_url, config.archive_sizes, config.archive_queries, config.seed
    )


# --- 4. throughput ------------------------------------------------------------------------------


async def throughput(
    server: Server, config: BenchConfig, progress: Progress = no_progress
) -> dict[str, Any]:
    """Each level: that many new sessions at once, each posting `session_turns` turns in a
    2,048-token window, so every session goes through the same mix (quiet turns, offloads,
    turns that recall) whatever the level."""
    levels = []
    for sessions in config.concurrency:
        stage = f"bench: throughput at {sessions} sessions (turns)"
        progress(stage, 0, sessions * config.session_turns)
        turned = partial(progress, stage, 1)
        levels.append(await _level(server, sessions, config.session_turns, config.seed, turned))
    return {"levels": levels, "turns_per_session": config.session_turns, "window": 2048}


async def _level(
    server: Server, sessions: int, turns: int, seed: int, turned: Callable[[], None]
) -> dict[str, Any]:
    """One level; after it, the embedding queue is waited for (the time to drain).
    `turned` hears of every turn answered."""
    latencies: list[float] = []
    kinds = {"offloaded": 0, "searched": 0}
    errors = 0
    peak = rss_mib(server.pid)
    peak_queue = 0
    running = True
    limits = httpx.Limits(max_connections=sessions + 2)
    async with httpx.AsyncClient(
        base_url=server.base, timeout=TURN_TIMEOUT_S, limits=limits
    ) as client:

        async def one(index: int) -> None:
            nonlocal errors
            rng = random.Random(seed * 1000 + index)
            session = f"load-{sessions}-{index}-{uuid.uuid4().hex[:6]}"
            for t in range(turns):
                try:
                    timed = await post_turn(
                        client, f"/sessions/{session}/turn", turn_body(rng, t, 2048, 110, "auto")
                    )
                except httpx.HTTPError:
                    errors += 1
                    continue
                finally:
                    turned()
                latencies.append(timed.client_ms)
                kinds["offloaded"] += timed.offloaded
                kinds["searched"] += timed.searched

        async def watch() -> None:
            nonlocal peak, peak_queue
            while running:
                peak = max(peak, rss_mib(server.pid))
                peak_queue = max(peak_queue, await queue_depth(server))
                await asyncio.sleep(0.25)

        before = await scrape(client)
        watcher = asyncio.create_task(watch())
        started = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(sessions)))
        elapsed = time.monotonic() - started
        running = False
        await watcher
        left = await queue_depth(server)
        drained_s = await until_drained(server, DRAIN_LIMIT_S)
        after = await scrape(client)
    words = _value(after, "ebbtide_embedded_words_total") - _value(
        before, "ebbtide_embedded_words_total"
    )
    busy_s = _value(after, "ebbtide_embedding_batch_seconds_sum") - _value(
        before, "ebbtide_embedding_batch_seconds_sum"
    )
    return {
        "queue": {
            "peak_chunks": max(peak_queue, left),
            "left_at_end_chunks": left,
            "drain_s": drained_s,
            "words_embedded": int(words),
            "worker_words_per_s": round(words / busy_s, 1) if busy_s else None,
        },
        "sessions": sessions,
        "turns": len(latencies),
        "offload_turns": kinds["offloaded"],
        "recall_turns": kinds["searched"],
        "seconds": round(elapsed, 1),
        "turns_per_s": round(len(latencies) / elapsed, 2),
        "latency_ms": percentiles(latencies),
        "errors": errors,
        "peak_rss_mib": peak,
    }


# --- 5. embedding cost --------------------------------------------------------------------------


async def embedding_cost(config: BenchConfig) -> dict[str, Any]:
    from app.providers.embedders import LocalEmbedder

    embedder = LocalEmbedder()
    rng = random.Random(config.seed + 2)
    await embedder.embed_query("warm up")
    queries: dict[str, Any] = {}
    for words in (10, 100):
        queries[f"{words}_words"] = percentiles(
            [
                await _ms(embedder.embed_query(sentence(rng, words)))
                for _ in range(config.embed_reps)
            ]
        )
    passages: dict[str, Any] = {}
    for batch in (1, 8, 32):
        reps = max(2, config.embed_reps // max(1, batch // 4))
        per_passage = [
            await _ms(embedder.embed_passages([sentence(rng, 200) for _ in range(batch)])) / batch
            for _ in range(reps)
        ]
        passages[f"batch_{batch}"] = percentiles(per_passage)
    return {"query_ms": queries, "passage_ms_each_200_words": passages}


async def _ms(call: Awaitable[Any]) -> float:
    started = time.perf_counter()
    await call
    return (time.perf_counter() - started) * 1000


# --- the run ------------------------------------------------------------------------------------


def _target(name: str, value: float, limit: float, *, at_least: bool = False) -> dict[str, Any]:
    met = value >= limit if at_least else value <= limit
    return {"target": name, "value": round(value, 2), "limit": limit, "met": met}


SEARCH_TARGET_CHUNKS = 100_000  # search p95 ≤ 15 ms at this many chunks (or the largest below)
SEARCH_TARGET_UNITS = 1_000_000  # and ≤ 30 ms from this many units on, where the run has them


def archive_search_targets(sizes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The search targets of the archive section: one at 100,000 chunks (the quick form's
    largest size stands in), one at 1,000,000 units when the run reached that size."""
    by_chunks = {size["chunks"]: size for size in sizes}
    chunks = max((c for c in by_chunks if c <= SEARCH_TARGET_CHUNKS), default=min(by_chunks))
    found = [
        _target(
            f"recall search p95 ≤ 15 ms at {chunks:,} chunks",
            by_chunks[chunks]["search_ms"]["p95"],
            15.0,
        )
    ]
    large = [size for size in sizes if size["units"] >= SEARCH_TARGET_UNITS]
    if large:
        size = min(large, key=lambda s: s["units"])
        found.append(
            _target(
                f"recall search p95 ≤ 30 ms at {size['units']:,} units",
                size["search_ms"]["p95"],
                30.0,
            )
        )
    return found


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    latency, history, archive = results["latency"], results["history"], results["archive"]
    floor_p95 = latency["floor"]["client_ms"]["p95"]
    never_p95 = latency["never_triggered"]["client_ms"]["p95"]
    offload_p95 = latency["offload_turns"]["client_ms"]["p95"]
    steady_p95 = latency["steady_with_recall"]["client_ms"]["p95"]
    search = archive_search_targets(archive["sizes"])
    points = history["points"]
    first, final = points[min(points, key=int)], points[max(points, key=int)]
    growth = final["server_total_ms_p50"] / max(first["server_total_ms_p50"], 1e-9)
    levels = {level["sessions"]: level for level in results["throughput"]["levels"]}
    sessions = 16 if 16 in levels else max(levels)
    return [
        _target(
            "never-triggered turn p95 ≤ 1.2 × the floor's p95 (client side)",
            never_p95 / max(floor_p95, 1e-9),
            1.2,
        ),
        _target(
            "offloading turn p95 ≤ 1.5 × a never-triggered turn's p95 (client side)",
            offload_p95 / max(never_p95, 1e-9),
            1.5,
        ),
        _target("steady turn with recall p95 ≤ 60 ms (client side)", steady_p95, 60.0),
        *search,
        _target(
            f"server time per turn at turn {max(points, key=int)} ≤ 1.2 × turn "
            f"{min(points, key=int)} (p50, non-offload turns)",
            growth,
            1.2,
        ),
        _target(
            f"throughput at {sessions} sessions ≥ 40 turns/s",
            levels[sessions]["turns_per_s"],
            40.0,
            at_least=True,
        ),
    ]


def run_bench(
    config: BenchConfig,
    out: Path,
    data_dir: Path,
    command: str,
    progress: Progress = no_progress,
) -> dict[str, Any]:
    """Runs every section (servers started and stopped here), writes bench.json and bench.md;
    `progress` hears of each section and of every turn posted."""
    out.mkdir(parents=True, exist_ok=True)
    admin = start_embedded(data_dir, database="postgres")
    names = {kind: f"ebbtide_bench_{kind}" for kind in ("local", "hash", "archive")}
    urls = {kind: fresh_database(admin, name) for kind, name in names.items()}
    started = time.monotonic()
    results: dict[str, Any] = {"command": command, "config": asdict(config)}
    try:
        # In-process sections first, while no server competes for the two cores.
        progress("bench: embedding cost", 0, 1)
        results["embedding"] = asyncio.run(embedding_cost(config))
        progress("bench: embedding cost", 1)
        progress("bench: growth with archive size", 0, 1)
        results["archive"] = asyncio.run(archive_growth(urls["archive"], config))
        progress("bench: growth with archive size", 1)
        with serving(urls["local"], "local", out / "server-local.log") as server:
            results["latency"] = asyncio.run(per_turn_latency(server, config, progress))
            results["throughput"] = asyncio.run(throughput(server, config, progress))
        with serving(urls["hash"], "hash", out / "server-hash.log") as server:
            results["history"] = asyncio.run(history_growth(server, config, progress))
    finally:
        for name in names.values():
            drop_database(admin, name)
    results["targets"] = targets(results)
    results["seconds"] = round(time.monotonic() - started, 1)
    (out / "bench.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "bench.md").write_text(markdown(results))
    return results
