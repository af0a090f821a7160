"""What the eval's plots show: the budget and the watermark lines on the prompt-tokens plot,
sample sizes and a 95 % interval on the recall plot."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from matplotlib.container import ErrorbarContainer

import app.evaluation
from app.core.stats import wilson_interval
from app.evaluation.baselines import STRATEGIES
from app.evaluation.plots import prompt_tokens_figure, recall_figure
from app.evaluation.report import _write_plots

LINES = {
    "window": 8000,
    "budget": 6000,
    "watermark_base": 5100,
    "offload_ratio": 0.8,
    "emergency_ratio": 0.95,
    "offload_at": 4080,
    "emergency_at": 4845,
}


def report(**extra: Any) -> dict[str, Any]:
    needles = [
        {
            "strategy": name,
            "pressure": pressure,
            "recall_at_5": hits / 20,
            "questions": 20,
            "hits": hits,
            "prompt_tokens_by_turn": [100 * t for t in range(30)],
        }
        for name, hits in zip(STRATEGIES, (6, 10, 16, 19), strict=True)
        for pressure in (1, 2, 3)
    ]
    return {"config": {"window": 8000, "pressures": [1, 2, 3]}, "needles": needles, **extra}


def test_the_prompt_tokens_plot_draws_the_budget_and_the_watermark_lines() -> None:
    figure = prompt_tokens_figure(report(lines=LINES))
    axes = figure.axes[0]
    flat = {
        line.get_label(): line.get_ydata()[0]
        for line in axes.lines
        if len(set(line.get_ydata())) == 1
    }
    assert flat["budget (window − reserve)"] == 6000
    assert flat["Ebbtide 80% line"] == 4080 and flat["Ebbtide 95% line"] == 4845
    assert "8,000" in axes.get_title()
    plt.close(figure)
    old = prompt_tokens_figure(report())  # a report from before the lines were recorded
    assert len(old.axes[0].lines) == len(STRATEGIES)
    plt.close(old)


def test_the_recall_plot_shows_each_points_interval_and_sample_size() -> None:
    figure = recall_figure(report())
    axes = figure.axes[0]
    assert "n = 20" in axes.get_title()
    bars = [c for c in axes.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == len(STRATEGIES)
    ebbtide = bars[-1]
    segments = ebbtide.lines[2][0].get_segments()
    low, high = wilson_interval(19, 20)
    assert [tuple(s[:, 1]) for s in segments] == [pytest.approx((low, high))] * 3
    plt.close(figure)


def test_a_report_without_sample_sizes_still_plots_its_points() -> None:
    legacy = report()
    for run in legacy["needles"]:
        del run["questions"], run["hits"]
    figure = recall_figure(legacy)
    assert "n unknown" in figure.axes[0].get_title()
    plt.close(figure)


def test_the_wilson_interval_stays_inside_zero_and_one() -> None:
    assert wilson_interval(20, 20)[1] == 1.0 and wilson_interval(20, 20)[0] == pytest.approx(
        0.839, abs=1e-3
    )
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(0, 20)[1] == pytest.approx(
        0.161, abs=1e-3
    )
    low, high = wilson_interval(10, 20)
    assert low == pytest.approx(0.299, abs=1e-3) and high == pytest.approx(0.701, abs=1e-3)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_without_matplotlib_the_report_says_how_to_get_its_plots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as on an install without the extra: matplotlib cannot be imported, plots not yet loaded
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.delitem(sys.modules, "app.evaluation.plots")
    monkeypatch.delattr(app.evaluation, "plots")
    lines = _write_plots(report(), tmp_path)
    assert "ebbtide[plots]" in lines[0]
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    assert _write_plots(report(), tmp_path)[0] == "![recall](recall_vs_pressure.png)"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "prompt_tokens.png",
        "recall_vs_pressure.png",
    ]
