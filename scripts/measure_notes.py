"""Scratchpad figures for docs/NOTES.md: a long task conversation (constraints, changes,
pending actions, confirmations in small talk), replayed through the turn pipeline on the
embedded Postgres; at every notes render, the notes' size and what they kept.

    python scripts/measure_notes.py --turns 500 --window 4000
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from app.evaluation.scenarios import replay_task, task_scenario
from app.providers.embedders import HashEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.settings import Settings
from app.store.database import Database
from app.store.embedded import fresh_database, start_embedded
from app.store.migrate import upgrade_head

BUCKET = 100


async def main(turns: int, window: int) -> None:
    admin = start_embedded(Path(tempfile.mkdtemp(prefix="ebbtide-notes-")), database="postgres")
    url = fresh_database(admin, "notes")
    await asyncio.to_thread(upgrade_head, url)
    database = Database.connect(url)
    ctx = ServiceContext(
        database=database,
        counter=default_counter(),
        embedder=HashEmbedder(),
        settings=Settings(database_url=url),
    )
    checks = await replay_task(ctx, "notes", task_scenario(turns=turns), context_window=window)
    await database.dispose()
    print(f"{turns} turns, window {window}, cap {ctx.settings.notes.cap_tokens} tokens\n")
    print(
        "| turns | renders | notes tokens min / median / max | constraints kept | open items kept |"
    )
    print("| --- | --- | --- | --- | --- |")
    for start in range(0, turns, BUCKET):
        bucket = [c for c in checks if start <= c.turn < start + BUCKET]
        if not bucket:
            continue
        tokens = sorted(c.tokens for c in bucket)
        kept = sum(c.constraints_kept for c in bucket)
        expected = sum(c.constraints_expected for c in bucket)
        open_kept = sum(c.open_kept for c in bucket)
        open_expected = sum(c.open_expected for c in bucket)
        print(
            f"| {start}-{start + BUCKET - 1} | {len(bucket)} | {tokens[0]} / "
            f"{tokens[len(tokens) // 2]} / {tokens[-1]} | {kept}/{expected} "
            f"| {open_kept}/{open_expected} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--window", type=int, default=4000)
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.window))
