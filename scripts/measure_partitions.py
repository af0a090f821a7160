"""Recall's search on a schema partitioned by session beside the plain one, for
docs/SCALING.md: one run, two databases loaded with the same archive.

    python scripts/measure_partitions.py --chunks 100000 --out docs/bench/partitions

Each database holds one session of `--chunks` synthetic chunks (the archive benchmark's,
app/bench/archive.py, from the same seed); in the second, every per-session table is
partitioned by hash of the session key into `--partitions` partitions, as Citus would shard
it. The searches then alternate between the two in rounds, so that whatever else the
machine does falls on both alike, and each search is timed as recall runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from app.bench import archive
from app.core.stats import percentiles
from app.store.embedded import fresh_database, start_embedded

STAGES = ("search", "vector", "lexical")


async def compare(
    urls: dict[str, str], rounds: int, queries: int, seed: int
) -> dict[str, dict[str, list[float]]]:
    timings: dict[str, dict[str, list[float]]] = {
        name: {stage: [] for stage in STAGES} for name in urls
    }
    for round_ in range(rounds):
        order = list(urls) if round_ % 2 == 0 else list(reversed(urls))
        for name in order:  # the same queries on both, first one then the other
            found = await archive.search_timings(urls[name], queries, seed + round_)
            for stage in STAGES:
                timings[name][stage] += found[stage]
    return timings


def _markdown(result: dict[str, Any]) -> str:
    lines = [
        f"# Recall search at {result['chunks']:,} chunks: plain and hash-partitioned",
        "",
        f"Measured {result['date']} by `{result['command']}` ({result['seconds']} s).",
        f"Setup: {result['setup']}. Partitioned: {result['partitions']} partitions by hash of "
        f"the session key. {result['queries']} searches each, in {result['rounds']} "
        "alternating rounds.",
        "",
        "| schema | search ms p50 / p95 | vector | lexical | load s | index s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, row in result["schemas"].items():
        cells = [f"{row[f'{s}_ms']['p50']} / {row[f'{s}_ms']['p95']}" for s in STAGES]
        lines.append(f"| {name} | {' | '.join(cells)} | {row['load_s']} | {row['index_build_s']} |")
    ratio = result["p95_ratio_partitioned_to_plain"]
    lines += ["", f"Search p95, partitioned ÷ plain: {ratio}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--queries", type=int, default=50, help="per round and schema")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path("out/partitions"))
    args = parser.parse_args()
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ebbtide-partitions-") as data_dir:
        server = start_embedded(Path(data_dir), database="postgres")
        urls = {
            name: fresh_database(server, f"ebbtide_{name}") for name in ("plain", "partitioned")
        }
        loads = {
            "plain": archive.load_archive(urls["plain"], args.chunks, args.seed),
            "partitioned": archive.load_archive(
                urls["partitioned"], args.chunks, args.seed, args.partitions
            ),
        }
        timings = asyncio.run(compare(urls, args.rounds, args.queries, args.seed))
    schemas = {
        name: {
            "load_s": round(loads[name].load_s, 1),
            "index_build_s": round(loads[name].index_build_s, 1),
            **{f"{stage}_ms": percentiles(timings[name][stage]) for stage in STAGES},
        }
        for name in urls
    }
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "command": "python scripts/measure_partitions.py "
        + " ".join(
            f"--{k} {v}" for k, v in (("chunks", args.chunks), ("partitions", args.partitions))
        ),
        "seconds": round(time.perf_counter() - began),
        "chunks": args.chunks,
        "partitions": args.partitions,
        "rounds": args.rounds,
        "queries": args.rounds * args.queries,
        "setup": archive.setup(),
        "schemas": schemas,
        "p95_ratio_partitioned_to_plain": round(
            schemas["partitioned"]["search_ms"]["p95"] / schemas["plain"]["search_ms"]["p95"], 2
        ),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "partitions.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "partitions.md").write_text(_markdown(result))
    print(_markdown(result))


if __name__ == "__main__":
    main()
