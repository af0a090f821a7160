"""Burst-then-ask (docs/RECALL.md, "Fresh vectors when asked"): a session posts a burst of
turns with offloads queued for embedding, its worker running beside it as in `ebbtide serve`,
and the needles are asked through `POST /recall`'s service right after the last turn. The
same needles are asked again once the queue has drained. Each mode gets a fresh database:

- `queue`: the recall embeds nothing itself (the worker alone; the asking session first);
- `inline N/T`: the recall embeds up to N of its session's queued chunks within T seconds.

    python scripts/measure_burst_recall.py --turns 100

Printed: needles found in the top 5 right after the burst and after the drain, the chunks
still queued when the first question came, and the recalls' time (p50 / max) — ratios of one
run on one machine, not promises.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from app.core.plan import TurnInput
from app.evaluation.scenarios import needle_scenario
from app.providers.embedders import LocalEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.services.embedding_queue import drain, run_worker
from app.services.recall import recall_query
from app.services.turns import run_turn
from app.settings import Settings
from app.store.database import Database
from app.store.embedded import drop_database, fresh_database, start_embedded
from app.store.migrate import upgrade_head
from app.store.models import DEFAULT_TENANT

SESSION = "burst"
WINDOW = 6000
TOP = 5


@dataclass(frozen=True)
class Mode:
    name: str
    inline_chunks: int
    inline_timeout_s: float


MODES = (
    Mode("queue", 0, 2.0),
    Mode("inline 8/2s", 8, 2.0),
    Mode("inline 24/3s", 24, 3.0),
    Mode("inline 64/4s", 64, 4.0),
)


@dataclass(frozen=True)
class Asked:
    found: int
    seconds: list[float]
    pending_at_first: int


async def ask_all(ctx: ServiceContext, questions: list[tuple[str, str]]) -> Asked:
    found, seconds, pending = 0, [], -1
    for question, fact in questions:
        started = time.perf_counter()
        result = await recall_query(ctx, DEFAULT_TENANT, SESSION, question, TOP)
        seconds.append(time.perf_counter() - started)
        pending = result.pending_chunks if pending < 0 else pending
        found += any(fact in hit.text for hit in result.results)
    return Asked(found, seconds, pending)


async def run_mode(admin: str, mode: Mode, turns: int) -> tuple[Asked, Asked]:
    name = "burst_" + "".join(c for c in mode.name if c.isalnum())
    url = fresh_database(admin, name)
    await asyncio.to_thread(upgrade_head, url)
    settings = Settings(
        database_url=url,
        embedder={"offload_embedding": "queued"},
        recall={
            "inline_embed_chunks": mode.inline_chunks,
            "inline_embed_timeout_s": mode.inline_timeout_s,
        },
    )
    ctx = ServiceContext(
        database=Database.connect(url),
        counter=default_counter(),
        embedder=LocalEmbedder(),
        settings=settings,
    )
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(ctx, stop))
    scenario = needle_scenario(turns=turns)
    try:
        for messages in scenario.turns:
            turn = TurnInput(
                session_id=SESSION,
                tenant_id=DEFAULT_TENANT,
                messages=messages,
                context_window=WINDOW,
                recall="off",  # the burst: an import of history, nobody asking yet
            )
            await run_turn(ctx, turn)
        questions = [(n.question, n.fact) for n in scenario.questions]
        right_after = await ask_all(ctx, questions)
        stop.set()
        await worker
        await drain(ctx)
        drained = await ask_all(ctx, questions)
        return right_after, drained
    finally:
        stop.set()
        await ctx.aclose()
        drop_database(admin, name)


async def main(turns: int) -> None:
    admin = start_embedded(Path(tempfile.mkdtemp(prefix="ebbtide-burst-")), database="postgres")
    print(f"{turns} turns, window {WINDOW}, top {TOP}\n")
    print(
        "| mode | found right after | found once drained | queued at the first question "
        "| recall s p50 / max right after |"
    )
    print("| --- | --- | --- | --- | --- |")
    for mode in MODES:
        after, drained = await run_mode(admin, mode, turns)
        total = len(after.seconds)
        print(
            f"| {mode.name} | {after.found}/{total} | {drained.found}/{total} "
            f"| {after.pending_at_first} | {statistics.median(after.seconds):.2f} / "
            f"{max(after.seconds):.2f} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100)
    args = parser.parse_args()
    asyncio.run(main(args.turns))
