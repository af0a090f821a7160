"""`bench.md`: the `ebbtide bench` results as Markdown tables."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

STAGE_ORDER = (
    "db_read",
    "plan",
    "embed",
    "recall_embed",
    "recall_search",
    "recall_rerank",
    "recall",
    "notes",
    "assemble",
    "db_write",
    "total",
)


def _p(summary: dict[str, float]) -> str:
    return f"{summary['p50']:.1f} / {summary['p95']:.1f} / {summary['p99']:.1f}"


def _p50_p95(summary: dict[str, float]) -> str:
    return f"{summary['p50']:.1f} / {summary['p95']:.1f}"


def _table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]


def latency_table(latency: dict[str, Any]) -> list[str]:
    kinds = [
        ("floor (store and echo)", latency["floor"]),
        ("never triggered", latency["never_triggered"]),
        ("steady state, recall each turn", latency["steady_with_recall"]),
        ("turn that offloads (recall off)", latency["offload_turns"]),
        ("turn that offloads and recalls", latency["offload_turns_with_recall"]),
    ]
    columns = ["turn kind", "n", "client p50 / p95 / p99 ms", "server total p50 / p95 / p99 ms"]
    return _table(
        columns,
        (
            [
                name,
                s["client_ms"]["n"],
                _p(s["client_ms"]),
                _p(s["server_ms"]["total"]) if s["server_ms"].get("total") else "n/a",
            ]
            for name, s in kinds
        ),
    )


def stage_table(latency: dict[str, Any]) -> list[str]:
    kinds = [
        ("never triggered", latency["never_triggered"]),
        ("steady, recall", latency["steady_with_recall"]),
        ("offload", latency["offload_turns"]),
    ]

    def cell(summary: dict[str, Any], stage: str) -> str:
        return _p50_p95(summary["server_ms"][stage]) if stage in summary["server_ms"] else "–"

    return _table(
        ["stage (server, p50 / p95 ms)", *(name for name, _ in kinds)],
        ([stage, *(cell(s, stage) for _, s in kinds)] for stage in STAGE_ORDER),
    )


def history_table(history: dict[str, Any]) -> list[str]:
    columns = [
        "turn",
        "non-offload turns measured",
        "server total p50 ms",
        "of which recall",
        "bookkeeping (total − recall − embed)",
        "client p50 ms",
    ]
    return _table(
        columns,
        (
            [
                turn,
                point["turns_measured"],
                f"{point['server_total_ms_p50']:.1f}",
                f"{point['recall_ms_p50']:.1f}",
                f"{point['bookkeeping_ms_p50']:.1f}",
                f"{point['client_ms_p50']:.1f}",
            ]
            for turn, point in history["points"].items()
        ),
    )


def archive_table(archive: dict[str, Any]) -> list[str]:
    columns = [
        "chunks",
        "search p50 / p95 / p99 ms",
        "vector p50 / p95 ms",
        "lexical p50 / p95 ms",
        "COPY load s",
        "HNSW build s",
    ]
    return _table(
        columns,
        (
            [
                f"{size['chunks']:,}",
                _p(size["search_ms"]),
                _p50_p95(size["vector_ms"]),
                _p50_p95(size["lexical_ms"]),
                size["load_s"],
                size["index_build_s"],
            ]
            for size in archive["sizes"]
        ),
    )


def round_trips_table(latency: dict[str, Any]) -> list[str]:
    names = {
        "floor": "floor (store and echo)",
        "quiet": "turn with no recall search (never triggered, or skipped)",
        "recall": "turn that searched the archive",
        "offload": "turn that offloaded",
    }
    trips = latency["round_trips_per_turn"]
    return _table(
        ["turn kind", "database round trips per turn (statements, BEGIN, COMMIT)"],
        ([names[kind], value] for kind, value in trips.items()),
    )


def embedding_queue_table(latency: dict[str, Any], throughput: dict[str, Any]) -> list[str]:
    lag = latency["embedding_lag"]
    rows = [
        [
            "latency section (one session at a time)",
            "–",
            f"{lag['mean_s']} / {lag['p50_s']} / {lag['p95_s']} ({lag['chunks']} chunks)",
            latency["drained_after_s"],
            "–",
        ]
    ]
    rows += [
        [
            f"throughput, {level['sessions']} sessions",
            f"{level['queue']['peak_chunks']} (left {level['queue']['left_at_end_chunks']})",
            "–",
            level["queue"]["drain_s"],
            level["queue"]["worker_words_per_s"],
        ]
        for level in throughput["levels"]
    ]
    columns = [
        "run",
        "queue peak, chunks",
        "lag mean / p50 / p95 s",
        "drained after, s",
        "worker words/s",
    ]
    return _table(columns, rows)


def throughput_table(throughput: dict[str, Any]) -> list[str]:
    columns = [
        "sessions",
        "turns (offload / recall)",
        "s",
        "turns/s",
        "p50 / p95 / p99 ms",
        "errors",
        "server peak RSS MiB",
    ]
    return _table(
        columns,
        (
            [
                level["sessions"],
                f"{level['turns']} ({level['offload_turns']} / {level['recall_turns']})",
                level["seconds"],
                level["turns_per_s"],
                _p(level["latency_ms"]),
                level["errors"],
                level["peak_rss_mib"],
            ]
            for level in throughput["levels"]
        ),
    )


def embedding_table(embedding: dict[str, Any]) -> list[str]:
    def cells(label: str, summary: dict[str, float]) -> list[str]:
        return [label, f"{summary['p50']:.1f}", f"{summary['p95']:.1f}"]

    rows = [cells(f"query, {n.replace('_', ' ')}", s) for n, s in embedding["query_ms"].items()]
    rows += [
        cells(f"passage of 200 words, {n.replace('_', ' ')} (per passage)", s)
        for n, s in embedding["passage_ms_each_200_words"].items()
    ]
    return _table(["call", "p50 ms", "p95 ms"], rows)


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "# ebbtide bench",
        "",
        f"Command: `{results['command']}` ({results['seconds']} s).",
        "",
        "## Targets",
        "",
        "| target | value | limit | met |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| {t['target']} | {t['value']} | {t['limit']} | {'yes' if t['met'] else 'no'} |"
        for t in results["targets"]
    ]
    sections = [
        ("Per-turn latency (local embedder)", latency_table(results["latency"])),
        ("Server stages", stage_table(results["latency"])),
        ("Database round trips", round_trips_table(results["latency"])),
        (
            "Embedding queue",
            embedding_queue_table(results["latency"], results["throughput"]),
        ),
        ("Growth with history (hash embedder)", history_table(results["history"])),
        ("Growth with archive size", archive_table(results["archive"])),
        ("Throughput (local embedder)", throughput_table(results["throughput"])),
        ("Local embedder", embedding_table(results["embedding"])),
    ]
    for title, table in sections:
        lines += ["", f"## {title}", "", *table]
    lines += ["", f"Archive setup: {results['archive']['setup']}.", ""]
    return "\n".join(lines)
