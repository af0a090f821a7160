"""`ebbtide bench` end to end at toy sizes: every section runs against real servers and the
embedded Postgres and lands in bench.json and bench.md. Figures are not asserted here (timing
goals live in docs/BENCHMARKS.md); shapes, counts and errors are."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import psycopg

from app.bench import archive
from app.bench.run import BenchConfig, run_bench
from tests.api.live import fresh_named_database
from tests.conftest import PROJECT_ROOT

TOY = BenchConfig(
    warm_up_turns=2,
    latency_turns=6,
    steady_warm_up_turns=30,
    steady_turns=6,
    history_points=(10, 30),
    history_window=4,
    archive_sizes=(300, 600),
    archive_queries=5,
    concurrency=(1, 2),
    session_turns=3,
    embed_reps=2,
)


class Recorded:
    """A `Progress` that keeps what it heard: each stage's total and what was done of it."""

    def __init__(self) -> None:
        self.totals: dict[str, int | None] = {}
        self.done: dict[str, int] = {}

    def __call__(self, stage: str, done: int, total: int | None = None) -> None:
        if total is not None:
            self.totals[stage] = total
        self.done[stage] = self.done.get(stage, 0) + done


def test_every_section_runs_and_is_reported(tmp_path: Path) -> None:
    progress = Recorded()
    results = run_bench(
        TOY, tmp_path, PROJECT_ROOT / ".ebbtide-test", "ebbtide bench (toy)", progress
    )
    # Every section said it ran, and each counted stage reached its total.
    assert len(progress.totals) == 2 + 1 + len(TOY.concurrency) + 1
    assert progress.done == progress.totals
    saved = json.loads((tmp_path / "bench.json").read_text())
    assert saved["targets"] == results["targets"] and len(saved["targets"]) == 6
    assert all(isinstance(t["met"], bool) and t["value"] > 0 for t in saved["targets"])

    latency = saved["latency"]
    assert (
        latency["floor"]["client_ms"]["n"] == 6
        and latency["never_triggered"]["client_ms"]["n"] == 6
    )
    # With an empty archive recall is skipped: no turn recalled anything (a count, not a time:
    # its stage's milliseconds grow with the machine's load).
    assert latency["never_triggered_recalls"] == 0
    steady = latency["steady_with_recall"]["client_ms"]["n"]
    assert steady + latency["offload_turns_with_recall"]["client_ms"]["n"] == 6
    assert latency["offload_turns"]["client_ms"]["n"] > 0  # the recall-off twin offloaded
    assert {"30"} <= set(saved["history"]["points"]) and saved["history"]["offloads"] > 0
    assert [s["chunks"] for s in saved["archive"]["sizes"]] == [300, 600]
    assert all(
        level["errors"] == 0 and level["turns"] > 0 for level in saved["throughput"]["levels"]
    )
    assert saved["embedding"]["query_ms"]["10_words"]["n"] == 2

    # The embedding queue: offloads queued chunks, the worker embedded them all.
    trips = latency["round_trips_per_turn"]
    assert {"floor", "quiet"} <= set(trips) and all(v > 0 for v in trips.values())
    assert trips["quiet"] < trips.get("recall", float("inf"))
    assert latency["embedding_lag"]["chunks"] > 0 and latency["drained_after_s"] is not None
    for level in saved["throughput"]["levels"]:
        assert level["queue"]["drain_s"] is not None  # the queue emptied after the level

    report = (tmp_path / "bench.md").read_text()
    for heading in (
        "## Targets",
        "## Per-turn latency",
        "## Growth with history",
        "## Growth with archive size",
        "## Throughput",
        "## Database round trips",
        "## Embedding queue",
        "## Local embedder",
    ):
        assert heading in report


async def test_the_archive_loads_on_hash_partitions_and_is_searched_there(
    database_url: str,
) -> None:
    """scripts/measure_partitions.py's two steps on a small archive: every chunk lands in the
    bench session's one partition, and each search finds the candidates it asks for."""
    with fresh_named_database(database_url, "ebbtide_bench_parts") as url:
        await asyncio.to_thread(archive.load_archive, url, 300, 3, 4)  # migrates: a thread
        with psycopg.connect(url) as db:
            counts = db.execute(
                "SELECT tableoid::regclass::text, count(*) FROM chunks GROUP BY 1"
            ).fetchall()
            totals = db.execute(  # BM25's totals, as the store would have kept them
                "SELECT lexical_chunks, lexical_terms = (SELECT sum(length(lexical)) FROM chunks) "
                "FROM sessions"
            ).fetchall()
        assert len(counts) == 1 and counts[0][1] == 300 and counts[0][0].startswith("chunks_p")
        assert totals == [(300, True)]
        timings = await archive.search_timings(url, queries=3, seed=3)
    assert {stage: len(values) for stage, values in timings.items()} == {
        "vector": 3,
        "lexical": 3,
        "search": 3,
    }
