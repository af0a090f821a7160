"""The eval report's two plots (matplotlib: the `plots` extra, which `make test` installs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from app.core.stats import wilson_interval
from app.evaluation.baselines import STRATEGIES


def recall_figure(report: dict[str, Any]) -> Figure:
    """Recall@5 per strategy and pressure, each point with its Wilson 95 % interval and the
    number of questions it stands on: 20 questions cannot tell 0.80 from 0.90."""
    figure, axes = plt.subplots(figsize=(7, 4.5))
    pressures = report["config"]["pressures"]
    offsets = _dodge(len(STRATEGIES), width=0.24)
    for name, offset in zip(STRATEGIES, offsets, strict=True):
        runs = [r for r in report["needles"] if r["strategy"] == name]
        xs = [r["pressure"] + offset for r in runs]
        ys = [r["recall_at_5"] for r in runs]
        bounds = [_interval(r) for r in runs]
        errors = [[y - lo for y, (lo, _) in zip(ys, bounds, strict=True)]]
        errors.append([hi - y for y, (_, hi) in zip(ys, bounds, strict=True)])
        axes.errorbar(xs, ys, yerr=errors, marker="o", capsize=3, label=name, linewidth=1)
    sizes = sorted({r.get("questions", 0) for r in report["needles"]})
    n_text = "n = " + ", ".join(str(n) for n in sizes) if sizes and sizes != [0] else "n unknown"
    axes.set(
        xlabel="conversation length / context window",
        ylabel="Recall@5 (fact in prompt)",
        ylim=(-0.05, 1.05),
        title=f"Needle recall vs window pressure\n({n_text} questions per point; "
        "bars: Wilson 95 % interval)",
    )
    axes.set_xticks(pressures)
    axes.legend(fontsize=8)
    figure.tight_layout()
    return figure


def _dodge(count: int, width: float) -> list[float]:
    """Small x offsets so that the strategies' error bars at one pressure do not overlap."""
    if count <= 1:
        return [0.0] * count
    return [-width / 2 + width * i / (count - 1) for i in range(count)]


def _interval(run: dict[str, Any]) -> tuple[float, float]:
    """The run's 95 % interval; a report without sample sizes gets none (a point)."""
    n = run.get("questions", 0)
    if not n:
        return run["recall_at_5"], run["recall_at_5"]
    return wilson_interval(run.get("hits", round(run["recall_at_5"] * n)), n)


def prompt_tokens_figure(report: dict[str, Any]) -> Figure:
    """Prompt tokens per turn at the highest pressure, against the budget every strategy
    must fit and Ebbtide's offload and emergency lines."""
    pressure = max(report["config"]["pressures"])
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for run in report["needles"]:
        if run["pressure"] == pressure:
            axes.plot(run["prompt_tokens_by_turn"], label=run["strategy"], linewidth=1)
    lines = report.get("lines")
    if lines:
        axes.axhline(
            lines["budget"], color="black", linewidth=1.2, label="budget (window − reserve)"
        )
        for key, ratio, style in (
            ("offload_at", "offload_ratio", "--"),
            ("emergency_at", "emergency_ratio", ":"),
        ):
            axes.axhline(
                lines[key],
                color="tab:red",
                linestyle=style,
                linewidth=1,
                label=f"Ebbtide {lines[ratio]:.0%} line",
            )
    axes.set(
        xlabel="turn",
        ylabel="prompt tokens",
        title=f"Prompt tokens per turn ({pressure}× the window of {report['config']['window']:,})",
    )
    axes.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    return figure


def save(figure: Figure, path: Path) -> None:
    figure.savefig(path, dpi=110)
    plt.close(figure)
