"""Fits recall's confidence model (app/core/confidence.py) for the packaged embedder, in-process
on a fresh embedded Postgres, and prints the weights and the test halves' reliability.

    python scripts/calibrate_confidence.py            # about 5 minutes on 2 cores

The weights go into `ConfidenceSettings` (app/settings.py) and the table into docs/RECALL.md.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
from dataclasses import asdict
from pathlib import Path

from app.evaluation.calibration import FitSettings, HitSample, collect, fit, reliability
from app.providers.embedders import LocalEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.settings import Settings
from app.store.database import Database
from app.store.embedded import fresh_database, start_embedded
from app.store.migrate import upgrade_head


async def gather() -> list[HitSample]:
    admin = start_embedded(Path(tempfile.mkdtemp(prefix="ebbtide-calibrate-")), database="postgres")
    url = fresh_database(admin, "calibrate")
    await asyncio.to_thread(upgrade_head, url)
    ctx = ServiceContext(
        database=Database.connect(url),
        counter=default_counter(),
        embedder=LocalEmbedder(),
        # No confidence floor while collecting: the fit must see the hits it would turn away.
        settings=Settings(database_url=url, recall={"asked_min_confidence": 0.0}),
    )
    try:
        return await collect(ctx)
    finally:
        await ctx.aclose()


def main() -> None:
    samples = asyncio.run(gather())
    dev = [s for s in samples if s.split == "dev"]
    similarities = [s.features.similarity for s in dev if s.features.similarity is not None]
    weights = fit(dev, FitSettings(words_only_similarity=round(statistics.median(similarities), 2)))
    print("weights:", {name: round(value, 3) for name, value in asdict(weights).items()})
    for set_name in ("chats", "hard"):
        test = [s for s in samples if s.set_name == set_name and s.split == "test"]
        print(f"\n{set_name}, test half: {len(test)} hits, {sum(s.right for s in test)} right")
        print("| confidence | hits | share right |\n| --- | --- | --- |")
        for row in reliability(test, weights):
            share = "–" if row.right is None else f"{row.right:.2f}"
            print(f"| {row.low:.1f}–{row.high:.1f} | {row.hits} | {share} |")


if __name__ == "__main__":
    main()
