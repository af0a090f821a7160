"""Needle backfill figures for docs/RECALL.md: Recall@1/@5 and recall-stage latency per
embedder, on the embedded Postgres, in-process.

    python scripts/measure_recall.py --window 8000 --turns 130 --seeds 1 2 7

Each (embedder, seed) run gets a fresh database. Latency is per question turn: the query
embedding, the candidate search (pgvector + full text) and the fusion/packing stage.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from app.core.ports import Embedder
from app.core.stats import percentiles
from app.evaluation.scenarios import NeedleResult, needle_scenario, replay_needles
from app.providers.embedders import HashEmbedder, LocalEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.settings import Settings
from app.store.database import Database
from app.store.embedded import drop_database, fresh_database, start_embedded
from app.store.migrate import upgrade_head

# The hash embedder's vectors are hashed words: its recall margins run larger than e5's (the
# same values as the tests', tests/builders.py).
HASH_RECALL = {"auto_min_margin": 0.5, "asked_min_margin": 0.35}


async def run_one(admin: str, kind: str, seed: int, window: int, turns: int) -> list[NeedleResult]:
    name = f"measure_{kind}_{seed}"
    url = fresh_database(admin, name)
    await asyncio.to_thread(upgrade_head, url)
    database = Database.connect(url)
    embedder: Embedder = LocalEmbedder() if kind == "local" else HashEmbedder()
    settings = Settings(database_url=url, recall=HASH_RECALL if kind == "hash" else {})
    ctx = ServiceContext(
        database=database, counter=default_counter(), embedder=embedder, settings=settings
    )
    try:
        return await replay_needles(
            ctx, "measure", needle_scenario(turns=turns, seed=seed), context_window=window
        )
    finally:
        await database.dispose()
        drop_database(admin, name)


async def main(window: int, turns: int, seeds: list[int]) -> None:
    admin = start_embedded(Path(tempfile.mkdtemp(prefix="ebbtide-measure-")), database="postgres")
    print(f"window {window}, {turns} turns, seeds {seeds}\n")
    print(
        "| embedder | Recall@1 | in prompt (block or notes) | embed p50/p95 ms | search p50/p95 ms "
        "| rerank+pack p50/p95 ms | injected tokens p50 |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind in ("local", "hash"):
        results = [r for seed in seeds for r in await run_one(admin, kind, seed, window, turns)]
        stages = {
            s: [r.timings_ms.get(f"recall_{s}", 0.0) for r in results]
            for s in ("embed", "search", "rerank")
        }
        cells = ["{p50:.1f} / {p95:.1f}".format(**percentiles(v)) for v in stages.values()]
        print(
            f"| {kind} | {sum(r.top1 for r in results) / len(results):.2f} "
            f"| {sum(r.in_prompt for r in results) / len(results):.2f} | {' | '.join(cells)} "
            f"| {statistics.median(r.injected_tokens for r in results):.0f} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=int, default=8000)
    parser.add_argument("--turns", type=int, default=130)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 7])
    args = parser.parse_args()
    asyncio.run(main(args.window, args.turns, args.seeds))
