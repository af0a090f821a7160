"""`bench.md`: the `ebbtide bench` results as Markdown tables."""

from __future__ import annotations

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


def latency_table(latency: dict[str, Any]) -> list[str]:
    rows = [
        ("floor (store and echo)", latency["floor"]),
        ("never triggered", latency["never_triggered"]),
        ("steady state, recall each turn", latency["steady_with_recall"]),
        ("turn that offloads", latency["offload_turns"]),
    ]
    lines = [
        "| turn kind | n | client p50 / p95 / p99 ms | server total p50 / p95 / p99 ms |",
        "| --- | --- | --- | --- |",
    ]
    for name, summary in rows:
        server_total = summary["server_ms"].get("total")
        total = _p(server_total) if server_total else "n/a"
        lines.append(
            f"| {name} | {summary['client_ms']['n']} | {_p(summary['client_ms'])} | {total} |"
        )
    return lines


def stage_table(latency: dict[str, Any]) -> list[str]:
    kinds = [
        ("never triggered", latency["never_triggered"]),
        ("steady, recall", latency["steady_with_recall"]),
        ("offload", latency["offload_turns"]),
    ]
    lines = [
        "| stage (server, p50 / p95 ms) | " + " | ".join(name for name, _ in kinds) + " |",
        "| --- |" + " --- |" * len(kinds),
    ]
    for stage in STAGE_ORDER:
        cells = [
            f"{s['server_ms'][stage]['p50']:.1f} / {s['server_ms'][stage]['p95']:.1f}"
            if stage in s["server_ms"]
            else "–"
            for _, s in kinds
        ]
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    return lines


def history_table(history: dict[str, Any]) -> list[str]:
    lines = [
        "| turn | non-offload turns measured | server total p50 ms | of which recall | "
        "bookkeeping (total − recall − embed) | client p50 ms |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for turn, point in history["points"].items():
        lines.append(
            f"| {turn} | {point['turns_measured']} | {point['server_total_ms_p50']:.1f} "
            f"| {point['recall_ms_p50']:.1f} | {point['bookkeeping_ms_p50']:.1f} "
            f"| {point['client_ms_p50']:.1f} |"
        )
    return lines


def archive_table(archive: dict[str, Any]) -> list[str]:
    lines = [
        "| chunks | search p50 / p95 / p99 ms | vector p50 / p95 ms | lexical p50 / p95 ms "
        "| COPY load s | HNSW build s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for size in archive["sizes"]:
        lines.append(
            f"| {size['chunks']:,} | {_p(size['search_ms'])} | {size['vector_ms']['p50']:.1f} / "
            f"{size['vector_ms']['p95']:.1f} | {size['lexical_ms']['p50']:.1f} / "
            f"{size['lexical_ms']['p95']:.1f} | {size['load_s']} | {size['index_build_s']} |"
        )
    return lines


def throughput_table(throughput: dict[str, Any]) -> list[str]:
    lines = [
        "| sessions | turns (offload / recall) | s | turns/s | p50 / p95 / p99 ms | errors "
        "| server peak RSS MiB |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for level in throughput["levels"]:
        lines.append(
            f"| {level['sessions']} | {level['turns']} ({level['offload_turns']} / "
            f"{level['recall_turns']}) | {level['seconds']} | {level['turns_per_s']} "
            f"| {_p(level['latency_ms'])} | {level['errors']} | {level['peak_rss_mib']} |"
        )
    return lines


def embedding_table(embedding: dict[str, Any]) -> list[str]:
    lines = ["| call | p50 ms | p95 ms |", "| --- | --- | --- |"]
    for name, summary in embedding["query_ms"].items():
        lines.append(
            f"| query, {name.replace('_', ' ')} | {summary['p50']:.1f} | {summary['p95']:.1f} |"
        )
    for name, summary in embedding["passage_ms_each_200_words"].items():
        lines.append(
            f"| passage of 200 words, {name.replace('_', ' ')} (per passage) "
            f"| {summary['p50']:.1f} | {summary['p95']:.1f} |"
        )
    return lines


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
        ("Growth with history (hash embedder)", history_table(results["history"])),
        ("Growth with archive size", archive_table(results["archive"])),
        ("Throughput (local embedder)", throughput_table(results["throughput"])),
        ("Local embedder", embedding_table(results["embedding"])),
    ]
    for title, table in sections:
        lines += ["", f"## {title}", "", *table]
    lines += ["", f"Archive setup: {results['archive']['setup']}.", ""]
    return "\n".join(lines)
