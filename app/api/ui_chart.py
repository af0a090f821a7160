"""The inspector's budget chart as SVG coordinates: one point per turn (prompt tokens sent),
the budget and its offload / emergency lines as steps (a session may change model), and a
marker at every offload. The template draws it; no script is needed to see it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.core.inspection import TimelinePoint

WIDTH, HEIGHT = 960, 300
LEFT, RIGHT, TOP, BOTTOM = 72, 96, 16, 36
Y_TICKS = 4
X_TICKS = 8
HEADROOM = 1.05  # the tallest value sits a little below the top edge


@dataclass(frozen=True)
class ChartPoint:
    turn: int
    x: float
    y: float
    prompt_tokens: int
    injected_tokens: int
    level: str


@dataclass(frozen=True)
class ChartMarker:
    """An offload: where it happened and what it wrote."""

    turn: int
    x: float
    tokens_freed: int
    chunks: int
    turn_range: tuple[int, int] | None


@dataclass(frozen=True)
class Tick:
    at: float
    label: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    top: float
    bottom: float  # the y of the x axis
    left: float
    right: float
    points: tuple[ChartPoint, ...]
    prompt_path: str  # polyline points of the prompt tokens
    injected_path: str  # ... of the recalled tokens in each prompt
    budget_path: str
    offload_path: str
    emergency_path: str
    markers: tuple[ChartMarker, ...]
    y_ticks: tuple[Tick, ...]
    x_ticks: tuple[Tick, ...]
    budget_label_y: float
    offload_label_y: float
    emergency_label_y: float
    offload_percent: int
    emergency_percent: int


def _steps(xs: Sequence[float], ys: Sequence[float], half: float) -> str:
    """A step line: each value holds from half a turn before its point to half a turn after."""
    pairs: list[str] = []
    for x, y in zip(xs, ys, strict=True):
        pairs.append(f"{x - half:.1f},{y:.1f}")
        pairs.append(f"{x + half:.1f},{y:.1f}")
    return " ".join(pairs)


def _ticks(top: float, count: int) -> list[float]:
    return [top * i / count for i in range(count + 1)]


def budget_chart(points: Sequence[TimelinePoint]) -> Chart | None:
    """None when there is no turn to draw."""
    if not points:
        return None
    plot_w, bottom = WIDTH - LEFT - RIGHT, HEIGHT - BOTTOM
    span = max(len(points) - 1, 1)
    tallest = max(max(p.budget, p.prompt_tokens) for p in points) * HEADROOM or 1

    def x_of(index: int) -> float:
        return LEFT + (plot_w * index / span if len(points) > 1 else plot_w / 2)

    def y_of(tokens: float) -> float:
        return bottom - (bottom - TOP) * tokens / tallest

    xs = [x_of(i) for i in range(len(points))]
    half = plot_w / span / 2 if len(points) > 1 else plot_w / 2
    last = points[-1]

    def line(of: Callable[[TimelinePoint], float]) -> str:
        return _steps(xs, [y_of(of(p)) for p in points], half)

    chart_points = tuple(
        ChartPoint(p.turn, x, y_of(p.prompt_tokens), p.prompt_tokens, p.injected_tokens, p.level)
        for p, x in zip(points, xs, strict=True)
    )
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        top=TOP,
        bottom=bottom,
        left=LEFT,
        right=WIDTH - RIGHT,
        points=chart_points,
        prompt_path=" ".join(f"{p.x:.1f},{p.y:.1f}" for p in chart_points),
        injected_path=" ".join(
            f"{x:.1f},{y_of(p.injected_tokens):.1f}" for p, x in zip(points, xs, strict=True)
        ),
        budget_path=line(lambda p: p.budget),
        offload_path=line(lambda p: p.watermark_base * p.offload_ratio),
        emergency_path=line(lambda p: p.watermark_base * p.emergency_ratio),
        markers=tuple(
            ChartMarker(
                p.turn, x, p.offload.tokens_freed, len(p.offload.chunk_ids), p.offload.turn_range
            )
            for p, x in zip(points, xs, strict=True)
            if p.offload is not None
        ),
        y_ticks=tuple(Tick(y_of(v), f"{round(v):,}") for v in _ticks(tallest, Y_TICKS)),
        x_ticks=tuple(
            Tick(xs[i], str(points[i].turn))
            for i in sorted({round(span * k / X_TICKS) for k in range(X_TICKS + 1)})
            if i < len(points)
        ),
        budget_label_y=y_of(last.budget),
        offload_label_y=y_of(last.watermark_base * last.offload_ratio),
        emergency_label_y=y_of(last.watermark_base * last.emergency_ratio),
        offload_percent=round(last.offload_ratio * 100),
        emergency_percent=round(last.emergency_ratio * 100),
    )
