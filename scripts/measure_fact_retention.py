"""Key-fact hit rate on the whole stated-facts set (docs/EVAL.md, "Key-fact hit rate"): every
conversation posted through the real pipeline on a fresh embedded database, then small talk up
to 1×, 3× and 10× the window; the share of the facts that still hold which the last prompt
carries (by the notes, the window or a recalled block), by split and language; and the share
of the tasks the set marks open at the end that the prompt still holds (open-task retention).

    python scripts/measure_fact_retention.py --window 2000

`ebbtide eval` runs the same measure (two held-out conversations with `--quick`).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from app.evaluation.fact_retention import PRESSURES, run_retention
from app.evaluation.stated_facts import SPLITS, load_set
from app.providers.embedders import LocalEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.settings import Settings
from app.store.database import Database
from app.store.embedded import drop_database, fresh_database, start_embedded
from app.store.migrate import upgrade_head


async def main(window: int) -> None:
    admin = start_embedded(Path(tempfile.mkdtemp(prefix="ebbtide-facts-")), database="postgres")
    url = fresh_database(admin, "fact_retention")
    await asyncio.to_thread(upgrade_head, url)
    ctx = ServiceContext(
        database=Database.connect(url),
        counter=default_counter(),
        embedder=LocalEmbedder(),
        settings=Settings(database_url=url),
    )
    started = time.perf_counter()
    print(f"window {window}, pressures {PRESSURES}\n")
    print(
        "| split | pressure | language | facts | in the prompt | by the notes | hit rate "
        "| open tasks | kept | open-task retention |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    try:
        for split in SPLITS:
            chosen = [c for c in load_set() if c.split == split]
            rows = await run_retention(ctx, chosen, window=window, label=f"facts-{split}")
            for row in sorted(rows, key=lambda r: (r.pressure, r.language)):
                print(
                    f"| {split} | {row.pressure}× | {row.language} | {row.facts} "
                    f"| {row.in_prompt} | {row.in_notes} | {row.hit_rate or 0:.2f} "
                    f"| {row.open_tasks} | {row.open_kept} | {row.open_retention or 0:.2f} |"
                )
    finally:
        await ctx.aclose()
        drop_database(admin, "fact_retention")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=int, default=2000)
    asyncio.run(main(parser.parse_args().window))
