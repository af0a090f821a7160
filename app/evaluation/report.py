"""Writing the `ebbtide eval` report: report.json, report.md and, with the `plots` extra
installed (matplotlib), two PNG plots (app/evaluation/plots.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def needle_table(report: dict[str, Any]) -> list[str]:
    lines = [
        "| pressure | strategy | Recall@5 | Recall@5, needles older than the budget | no-match "
        "guard | prompt tokens mean / max | injected tokens / turn | turn p50 / p95 ms "
        "| fallback rate |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run in report["needles"]:
        series = run["series"]
        latency = series["latency_ms"]
        far = f"{_pct(run['recall_far'])} of {run['far_needles']}"
        lines.append(
            f"| {run['pressure']}× | {run['strategy']} | {_pct(run['recall_at_5'])} | {far} "
            f"| {_pct(run['guard_rate'])} | {series['prompt_tokens_mean']:.0f} / "
            f"{series['prompt_tokens_max']} | {series['injected_tokens_mean']:.0f} "
            f"| {latency['p50']:.1f} / {latency['p95']:.1f} | {series['fallback_rate']:.2%} |"
        )
    return lines


def task_table(report: dict[str, Any]) -> list[str]:
    lines = [
        "| strategy | constraints | open items | goal | latest done | decision names its option "
        "| prompt tokens mean / max | turn p50 / p95 ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run in report["task"]:
        series = run["series"]
        lines.append(
            f"| {run['strategy']} | {_pct(run['constraint_retention'])} "
            f"| {_pct(run['open_item_retention'])} | {_pct(run['goal_retention'])} "
            f"| {_pct(run['done_retention'])} | {_pct(run['reference_retention'])} "
            f"| {series['prompt_tokens_mean']:.0f} / "
            f"{series['prompt_tokens_max']} | {series['latency_ms']['p50']:.1f} / "
            f"{series['latency_ms']['p95']:.1f} |"
        )
    return lines


def stage_table(report: dict[str, Any]) -> list[str]:
    lines = ["| pressure | stage | p50 ms | p95 ms |", "| --- | --- | --- | --- |"]
    for run in report["needles"]:
        if run["strategy"] == "ebbtide":
            for stage, values in run["series"]["stages_ms"].items():
                lines.append(
                    f"| {run['pressure']}× | {stage} | {values['p50']:.1f} | {values['p95']:.1f} |"
                )
    return lines


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def hard_tables(report: dict[str, Any]) -> list[str]:
    """The hard recall set: one table per pressure, by language, kind and split, the flat
    hybrid baseline and the embedder's ceiling beside the service (– where not measured)."""
    if not report.get("hard"):
        return ["Not run: the hard set needs Ebbtide in-process (no `--url`)."]
    lines: list[str] = []
    for run in report["hard"]:
        search = run["search_ms"]
        lines += [
            f"### {run['pressure']}× the window (conversations of {run['tokens']} tokens; "
            f"recall search p50 {search['p50']:.1f} ms, p95 {search['p95']:.1f} ms)",
            "",
            "| group | n | R@1 | R@5 | R@10 | flat R@5 | flat R@10 | ceiling R@5 | twin no-match "
            "| needle in prompt | false injection |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for row in run["rows"]:
            lines.append(
                f"| {row['group']} | {row['needles']} ({row['archived']} archived) "
                f"| {_cell(row['recall_at_1'])} | {_cell(row['recall_at_5'])} "
                f"| {_cell(row['recall_at_10'])} | {_cell(row.get('flat_at_5'))} "
                f"| {_cell(row.get('flat_at_10'))} | {_cell(row['ceiling_at_5'])} "
                f"| {_cell(row['twin_no_match'])} | {_cell(row['in_prompt'])} "
                f"| {_cell(row['false_injection'])} |"
            )
        lines.append("")
        if run.get("stable_prefix"):
            lines += [prefix_line(run["stable_prefix"]), ""]
    return lines


def chats_table(report: dict[str, Any]) -> list[str]:
    """The long-chats set: Ebbtide's R@5 / R@10 (any / all evidence) beside the flat hybrid
    baseline's, by language, kind, shared words and split."""
    chats = report.get("chats")
    if not chats:
        return ["Not run: the long-chats set needs Ebbtide in-process (no `--url`)."]
    lines = [
        f"Window {chats['window']} tokens. R@k over the questions whose evidence had left the "
        "window (any / all of the evidence messages in the top k).",
        "",
        "| group | n (archived) | R@5 | R@10 | flat R@5 | flat R@10 | answered |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in chats["rows"]:
        lines.append(
            f"| {row['group']} | {row['questions']} ({row['archived']}) "
            f"| {_cell(row['any_at_5'])} / {_cell(row['all_at_5'])} "
            f"| {_cell(row['any_at_10'])} / {_cell(row['all_at_10'])} "
            f"| {_cell(row['flat_any_at_5'])} / {_cell(row['flat_all_at_5'])} "
            f"| {_cell(row['flat_any_at_10'])} / {_cell(row['flat_all_at_10'])} "
            f"| {_cell(row['answered'])} |"
        )
    return [*lines, ""]


def stated_facts_table(report: dict[str, Any]) -> list[str]:
    """The stated-facts set: the extractor's precision / recall by kind, language and split
    (holdout: written after the extractor and never tuned against)."""
    rows = report.get("stated_facts") or []
    lines = [
        "| split | language | "
        + " | ".join(sorted({r["kind"] for r in rows}, key=_kind_order))
        + " |",
        "| --- | --- |" + " --- |" * len({r["kind"] for r in rows}),
    ]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["split"], row["language"]), []).append(row)
    for (split, language), cells in groups.items():
        ordered = sorted(cells, key=lambda r: _kind_order(r["kind"]))
        lines.append(
            f"| {split} | {language} | "
            + " | ".join(
                f"{_cell(r['precision'])} / {_cell(r['recall'])} ({r['annotated']})"
                for r in ordered
            )
            + " |"
        )
    return [*lines, ""]


def proposed_facts_table(report: dict[str, Any]) -> list[str]:
    """The headroom of a chat model's proposed facts, measured with a scripted model that
    knows the set's answers (app/evaluation/facts_oracle.py), the rules alone beside."""
    rows = report.get("proposed_facts") or []
    kinds = sorted({r["kind"] for r in rows}, key=_kind_order)
    lines = [
        "| helper | split | " + " | ".join(kinds) + " | made-up facts kept (whole set) |",
        "| --- | --- |" + " --- |" * (len(kinds) + 1),
    ]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["helper"], row["split"]), []).append(row)
    for (helper, split), cells in groups.items():
        by_kind = {r["kind"]: r for r in cells}
        made_up = f"{cells[0]['made_up_kept']} of {cells[0]['made_up']}"
        lines.append(
            f"| {helper} | {split} | "
            + " | ".join(
                f"{_cell(by_kind[k]['precision'])} / {_cell(by_kind[k]['recall'])}" for k in kinds
            )
            + f" | {made_up} |"
        )
    return [*lines, ""]


def retention_table(report: dict[str, Any]) -> list[str]:
    """The key-fact hit rate and the open-task retention after N× the window."""
    rows = report.get("fact_retention") or []
    if not rows:
        return ["Not run: the key-fact hit rate needs Ebbtide in-process (no `--url`).", ""]
    lines = [
        f"Window {rows[0]['window']} tokens.",
        "",
        "| pressure | language | facts | in the prompt | of them by the notes | hit rate "
        "| open tasks | kept | open-task retention |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {row['pressure']}× | {row['language']} | {row['facts']} | {row['in_prompt']} "
            f"| {row['in_notes']} | {_cell(row['hit_rate'])} | {row['open_tasks']} "
            f"| {row['open_kept']} | {_cell(row['open_retention'])} |"
        )
    return [*lines, ""]


_KINDS = ("amount", "date", "party", "identifier", "choice", "preference")


def _kind_order(kind: str) -> int:
    return _KINDS.index(kind) if kind in _KINDS else len(_KINDS)


def prefix_line(prefix: dict[str, Any]) -> str:
    """The stable-prefix shares of a run's turns (app/evaluation/prefix.py), in one line."""
    return (
        f"Stable prefix (share of each prompt that repeats the previous one from its start): "
        f"median {_cell(prefix['steady_median'])}, p10 {_cell(prefix['steady_p10'])}, "
        f"lowest {_cell(prefix['steady_min'])} over {prefix['steady_turns']} turns without an "
        f"offload, {_cell(prefix['steady_extending'])} of which kept the whole previous prompt; "
        f"median {_cell(prefix['offload_median'])} over {prefix['offload_turns']} offload turns."
    )


def write_report(report: dict[str, Any], out: Path, command: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    figures = _write_plots(report, out)
    config = report["config"]
    lines = [
        "# Ebbtide evaluation",
        "",
        f"Command: `{command}`",
        "",
        f"Window {config['window']} tokens, pressures {config['pressures']}, task "
        f"{config['task_turns']} turns, seed {config['seed']}.",
        "",
        "## Needle backfill and no-match guard",
        "",
        *needle_table(report),
        "",
        "## Ebbtide recall stages",
        "",
        *stage_table(report),
        "",
        "## Task continuity (retention: the share of turns whose prompt holds it)",
        "",
        *task_table(report),
        "",
        "## Hard recall set (docs/RECALL.md): paraphrases, distractors, unanswerable twins",
        "",
        "R@k through the recall use case (`POST /recall`), over needles whose fact had left "
        "the window; needle in prompt and false injection through the turn (auto mode).",
        "",
        *hard_tables(report),
        "## Long chats (docs/RECALL.md): months of chat between friends, questions of every kind",
        "",
        *chats_table(report),
        "## Stated facts (docs/EVAL.md): precision / recall of what the user stated (facts)",
        "",
        *stated_facts_table(report),
        "### A chat model's proposed facts: headroom with a scripted model (precision / recall)",
        "",
        *proposed_facts_table(report),
        "### Key-fact hit rate: the set's facts still in the prompt after N× the window",
        "",
        *retention_table(report),
        *figures,
    ]
    (out / "report.md").write_text("\n".join(lines))


def _write_plots(report: dict[str, Any], out: Path) -> list[str]:
    """The two plots as PNG files, and the report's lines that show them; without matplotlib
    (the `plots` extra) a line that says how to get them."""
    try:
        from app.evaluation import plots
    except ImportError:
        return ["No plots: they need matplotlib (`pip install 'ebbtide[plots]'`).", ""]
    plots.save(plots.recall_figure(report), out / "recall_vs_pressure.png")
    plots.save(plots.prompt_tokens_figure(report), out / "prompt_tokens.png")
    return ["![recall](recall_vs_pressure.png)", "", "![prompt tokens](prompt_tokens.png)", ""]
