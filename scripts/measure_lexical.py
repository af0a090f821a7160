"""The lexical channel's BM25 statement beside the one it replaced, on one archive, in one run:
for docs/BENCHMARKS.md.

    python scripts/measure_lexical.py --chunks 100000 --out docs/bench/lexical-bm25

One session of `--chunks` synthetic chunks (the archive benchmark's, app/bench/archive.py:
40 terms drawn evenly from a 5,000-word vocabulary each, 4-term queries), vacuumed after
the load as autovacuum would have. Each query runs both statements, alternating which goes
first, so that whatever else the machine does falls on both alike. Besides their times: how
much of the top R the two share (the ranking changed by design: BM25 weighs by the
session's document frequencies and each chunk's length).

`IDF_STATEMENT` is the statement of commit 42cc6b2 (`_IDF_RANKED` in app/store/recall.py),
kept here only as the baseline of this measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import String, text

from app.bench import archive
from app.core.stats import percentiles
from app.services.recall import lexical_scan
from app.settings import RecallSettings
from app.store.database import Database
from app.store.embedded import fresh_database, start_embedded
from app.store.recall import lexical_candidates, tsquery_any

IDF_STATEMENT = text(
    """
    WITH matching AS (
        SELECT id, turn_start, lexical FROM chunks
        WHERE session_id = :session_id AND lexical @@ CAST(:any_term AS tsquery)
        ORDER BY turn_start DESC
        LIMIT :max_rows
    ), holds AS (
        SELECT m.id, m.turn_start, q.ord
        FROM matching AS m
        JOIN unnest(CAST(:each_term AS tsquery[])) WITH ORDINALITY AS q(term, ord)
            ON m.lexical @@ q.term
    ), weights AS (
        SELECT ord, ln(1 + (SELECT count(*) FROM matching)::float8 / (1 + count(*))) AS idf
        FROM holds GROUP BY ord
    )
    SELECT h.id, sum(w.idf) AS score
    FROM holds AS h JOIN weights AS w USING (ord)
    GROUP BY h.id, h.turn_start
    ORDER BY score DESC, h.turn_start DESC, h.id
    LIMIT :limit
    """
).columns(id=String)


async def compare(url: str, queries: int, seed: int) -> dict[str, Any]:
    settings = RecallSettings()
    scan = lexical_scan(settings)
    rng = np.random.default_rng(seed)
    database = Database.connect(url, pool_size=1)
    timings: dict[str, list[float]] = {"idf": [], "bm25": []}
    shared: list[float] = []
    try:
        for i in range(queries + 20):  # the first 20 warm the cache and the pool
            terms = [f"term{t}" for t in rng.integers(0, archive.VOCABULARY, size=4)]
            found: dict[str, list[str]] = {}
            for name in ("idf", "bm25") if i % 2 == 0 else ("bm25", "idf"):
                async with database.transaction() as db:
                    began = time.perf_counter()
                    if name == "bm25":
                        rows = await lexical_candidates(
                            db, archive.SESSION, terms, settings.candidates, scan
                        )
                        found[name] = [row.id for row in rows]
                    else:
                        result = await db.execute(
                            IDF_STATEMENT.bindparams(
                                session_id=archive.SESSION,
                                any_term=tsquery_any(terms),
                                each_term=[tsquery_any([t]) for t in terms],
                                max_rows=settings.lexical_max_rows,
                                limit=settings.candidates,
                            )
                        )
                        found[name] = list(result.scalars())
                    elapsed = (time.perf_counter() - began) * 1000
                if i >= 20:
                    timings[name].append(elapsed)
            if i >= 20 and found["idf"]:
                shared.append(len(set(found["idf"]) & set(found["bm25"])) / len(found["idf"]))
    finally:
        await database.dispose()
    return {
        "ms": {name: percentiles(values) for name, values in timings.items()},
        "top_r_shared": round(float(np.mean(shared)), 3),
        "candidates": settings.candidates,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path("out/lexical-bm25"))
    args = parser.parse_args()
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ebbtide-lexical-") as data_dir:
        server = start_embedded(Path(data_dir), database="postgres")
        url = fresh_database(server, "ebbtide_lexical")
        load = archive.load_archive(url, args.chunks, args.seed, vector_index=False)
        result = asyncio.run(compare(url, args.queries, args.seed))
    result |= {
        "chunks": args.chunks,
        "queries": args.queries,
        "load_s": round(load.load_s, 1),
        "seconds": round(time.perf_counter() - began),
        "date": time.strftime("%Y-%m-%d"),
        "command": f"python scripts/measure_lexical.py --chunks {args.chunks}",
    }
    result["p95_ratio_bm25_to_idf"] = round(
        result["ms"]["bm25"]["p95"] / result["ms"]["idf"]["p95"], 2
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
