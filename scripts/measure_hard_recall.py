"""The hard recall set's figures for docs/RECALL.md, in-process on a fresh embedded Postgres.

    python scripts/measure_hard_recall.py --window 8000 --pressures 3 --references
    python scripts/measure_hard_recall.py --llm both --llm-error 0.2   # the scripted LLM

Prints one table per pressure (by language, kind and split) and the recall search p95.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from app.core.stats import percentiles
from app.evaluation.hard_recall import HardConfig, markdown, rows, run_pressure
from app.evaluation.oracle import LLM_HELP, LlmHelp, with_oracle
from app.evaluation.report import prefix_line
from app.providers.embedders import LocalEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.settings import Settings
from app.store.database import Database
from app.store.embedded import fresh_database, start_embedded
from app.store.migrate import upgrade_head


def recall_overrides(pairs: list[str]) -> dict[str, float]:
    """`name=value` pairs for the recall settings, for ablations (`question_shift=0`)."""
    return {name: float(value) for name, _, value in (p.partition("=") for p in pairs)}


async def main(
    window: int,
    pressures: list[float],
    references: bool,
    overrides: dict[str, float],
    llm: LlmHelp | None,
    llm_error: float,
) -> list[dict[str, object]]:
    admin = start_embedded(Path(tempfile.mkdtemp(prefix="ebbtide-hard-")), database="postgres")
    url = fresh_database(admin, "hard_recall")
    await asyncio.to_thread(upgrade_head, url)
    database = Database.connect(url)
    ctx = ServiceContext(
        database=database,
        counter=default_counter(),
        embedder=LocalEmbedder(),
        settings=Settings(database_url=url, recall=overrides),
    )
    if llm is not None:
        ctx = with_oracle(ctx, llm, llm_error)
    config = HardConfig(window=window, pressures=tuple(pressures))
    report = []
    try:
        for pressure in pressures:
            started = time.perf_counter()
            run = await run_pressure(ctx, config, pressure, with_references=references)
            table = rows(run.outcomes)
            print(markdown(pressure, table))
            search = percentiles(run.search_ms)
            print(
                f"\nconversation tokens {run.tokens}; recall search p50 {search['p50']:.1f} "
                f"p95 {search['p95']:.1f} ms; {time.perf_counter() - started:.0f} s\n"
            )
            print(prefix_line(asdict(run.prefix())) + "\n")
            report.append(
                {
                    "pressure": pressure,
                    "rows": [asdict(r) for r in table],
                    "search_ms": search,
                    "stable_prefix": asdict(run.prefix()),
                    "misses": [
                        {
                            "id": o.needle.id,
                            "rank": o.rank,
                            "archived": o.archived,
                            "in_prompt": o.in_prompt,
                            "twin_injected": o.twin_injected,
                            "confidence": o.confidence,
                            "twin_confidence": o.twin_confidence,
                        }
                        for o in run.outcomes
                    ],
                }
            )
    finally:
        await database.dispose()
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=int, default=8000)
    parser.add_argument("--pressures", type=float, nargs="+", default=[3])
    parser.add_argument(
        "--references", action="store_true", help="the flat baseline and the embedder's ceiling"
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--set", nargs="*", default=[], help="recall settings: name=value")
    parser.add_argument("--llm", choices=LLM_HELP, default=None, help="the scripted LLM's help")
    parser.add_argument("--llm-error", type=float, default=0.0, help="its share of wrong calls")
    args = parser.parse_args()
    overrides = recall_overrides(args.set)
    report = asyncio.run(
        main(args.window, args.pressures, args.references, overrides, args.llm, args.llm_error)
    )
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False))
