"""`ebbtide eval`: the evaluation protocol of docs/DESIGN.md §10, against the baselines.

Scenarios, all deterministic from a seed and mixing Chinese and English:
- needle backfill at 1×, 2×, 3× the window: 20 planted facts asked back in natural language
  (9 through references), then questions about things never said (the no-match guard);
- task continuity: constraints, changes and pending actions spread through a long chat,
  replayed turn by turn (it covers the constraint, reference and pending-action replays).

Metrics per scenario and strategy: Recall@5 — the planted sentence is in the prompt sent to
the model (for Ebbtide the recalled block holds at most 5 chunks); the same restricted to
needles planted further back than the budget (what truncation cannot keep: its recall there
is 0 by construction, which keeps the harness honest); constraint and open-item retention;
prompt and injected tokens per turn; latency p50/p95 per turn and per recall stage; fallback
rate; no-match guard rate.
"""

from __future__ import annotations

import statistics
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from app.core.messages import Message
from app.core.rewrite import has_reference
from app.core.stats import percentiles
from app.evaluation.baselines import (
    STRATEGIES,
    CompactionOnly,
    EbbtideInProcess,
    EbbtideOverHttp,
    FullRag,
    Kit,
    Strategy,
    Truncation,
    TurnOutput,
    budget_lines,
    budget_of,
)
from app.evaluation.chats_recall import ChatsConfig, chats_rows, run_chats
from app.evaluation.fact_retention import RetentionConfig, run_retention
from app.evaluation.facts_oracle import headroom_rows
from app.evaluation.hard_recall import HardConfig, rows, run_pressure
from app.evaluation.report import write_report
from app.evaluation.scenarios import NEVER_SAID, needle_scenario, task_scenario
from app.evaluation.stated_facts import extraction_rows, load_set, score_extraction
from app.main import build_context, build_embedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.settings import Settings

Factory = Callable[[str, str], Strategy]  # (strategy name, session id) -> strategy
Progress = Callable[[int], None]


@dataclass(frozen=True)
class EvalConfig:
    window: int = 8000
    pressures: tuple[int, ...] = (1, 2, 3)
    task_turns: int = 500
    seed: int = 7
    hard: HardConfig = field(default_factory=HardConfig)
    chats: ChatsConfig = field(default_factory=ChatsConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)

    @classmethod
    def quick(cls) -> EvalConfig:
        return cls(
            window=3000,
            pressures=(1, 2, 3),
            task_turns=100,
            hard=HardConfig.quick(),
            chats=ChatsConfig.quick(),
            retention=RetentionConfig.quick(),
        )


@dataclass
class Series:
    """What one strategy did over one scenario run."""

    prompt_tokens: list[int] = field(default_factory=list)
    injected_tokens: list[int] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)
    stages_ms: dict[str, list[float]] = field(default_factory=dict)
    fallbacks: int = 0

    def record(self, out: TurnOutput) -> None:
        self.prompt_tokens.append(out.prompt_tokens)
        self.injected_tokens.append(out.injected_tokens)
        self.latency_ms.append(out.latency_ms)
        self.fallbacks += out.fallback
        for stage, ms in out.stages_ms.items():
            self.stages_ms.setdefault(stage, []).append(ms)

    def summary(self) -> dict[str, Any]:
        turns = max(1, len(self.prompt_tokens))
        return {
            "turns": len(self.prompt_tokens),
            "prompt_tokens_mean": round(statistics.fmean(self.prompt_tokens or [0]), 1),
            "prompt_tokens_max": max(self.prompt_tokens or [0]),
            "injected_tokens_mean": round(statistics.fmean(self.injected_tokens or [0]), 1),
            "latency_ms": percentiles(self.latency_ms),
            "stages_ms": {stage: percentiles(v) for stage, v in self.stages_ms.items()},
            "fallback_rate": round(self.fallbacks / turns, 4),
        }


def prompt_text(prompt: Iterable[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in prompt)


def _history_text(prompt: Sequence[dict[str, Any]]) -> str:
    """The prompt without its last message (the question itself)."""
    return prompt_text(prompt[:-1])


@dataclass
class NeedleRun:
    strategy: str
    pressure: int
    recall_at_5: float
    recall_far: float | None
    far_needles: int
    guard_rate: float
    series: Series
    questions: int = 0  # the sample Recall@5 is measured on
    hits: int = 0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["series"] = self.series.summary()
        data["prompt_tokens_by_turn"] = self.series.prompt_tokens
        return data


def _turns_for(kit: Kit, pressure: int, window: int, seed: int) -> int:
    sample = needle_scenario(turns=40, seed=seed)
    tokens = sum(kit.counter.count(m.text) for t in sample.turns for m in t) / 40
    return max(4, round(pressure * window / tokens))


async def run_needles(
    kit: Kit, make: Factory, name: str, pressure: int, config: EvalConfig, progress: Progress
) -> NeedleRun:
    scenario = needle_scenario(
        turns=_turns_for(kit, pressure, config.window, config.seed), seed=config.seed
    )
    strategy, series = make(name, f"eval-needles-{pressure}-{uuid.uuid4().hex[:8]}"), Series()
    planted_at: dict[str, int] = {}
    posted = 0
    for messages in scenario.turns:
        series.record(await strategy.turn(messages))
        posted += sum(kit.counter.count(m.text) for m in messages)
        for needle in scenario.questions:
            if needle.fact not in planted_at and any(needle.fact in m.text for m in messages):
                planted_at[needle.fact] = posted
        progress(1)
    hits, far, far_hits = 0, 0, 0
    budget = budget_of(kit, config.window)
    for needle in scenario.questions:
        out = await strategy.turn([Message.of("user", needle.question)])
        series.record(out)
        # Without its final stop: a summary line may quote the sentence and add "(turn 5)".
        found = needle.fact.rstrip("。.") in _history_text(out.prompt)
        hits += found
        if posted - planted_at[needle.fact] > budget:
            far, far_hits = far + 1, far_hits + found
        progress(1)
    guarded = 0
    for question in NEVER_SAID:
        out = await strategy.turn([Message.of("user", question)])
        guarded += _guarded(out, question)
        progress(1)
    return NeedleRun(
        strategy=name,
        pressure=pressure,
        recall_at_5=round(hits / len(scenario.questions), 4),
        recall_far=round(far_hits / far, 4) if far else None,
        far_needles=far,
        guard_rate=round(guarded / len(NEVER_SAID), 4),
        series=series,
        questions=len(scenario.questions),
        hits=hits,
    )


def _guarded(out: TurnOutput, question: str) -> bool:
    """This turn injected nothing recalled, and a reference question got the no-match line
    (blocks earlier turns left in the prompt are history, not this answer)."""
    recalled = out.injected_tokens > 0 and not out.no_match
    return not recalled and (out.no_match or not has_reference(question))


@dataclass
class TaskRun:
    strategy: str
    constraint_retention: float
    open_item_retention: float
    goal_retention: float
    done_retention: float
    reference_retention: float
    series: Series

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["series"] = self.series.summary()
        return data


async def run_task(
    kit: Kit, make: Factory, name: str, config: EvalConfig, progress: Progress
) -> TaskRun:
    scenario = task_scenario(turns=config.task_turns, seed=config.seed)
    strategy, series = make(name, f"eval-task-{uuid.uuid4().hex[:8]}"), Series()
    kept: dict[str, list[bool]] = {}
    for turn, messages in enumerate(scenario.turns):
        out = await strategy.turn(messages)
        series.record(out)
        text = prompt_text(out.prompt)
        kept.setdefault("constraint", []).extend(
            c in text for c in scenario.active_constraints(turn)
        )
        kept.setdefault("open", []).extend(p in text for p in scenario.open_pending(turn))
        for kind, expected in scenario.expected_texts(turn).items():
            kept.setdefault(kind, []).append(expected in text)
        progress(1)

    def share(kind: str) -> float:
        values = kept.get(kind, [])
        return round(sum(values) / len(values), 4) if values else 1.0

    return TaskRun(
        strategy=name,
        constraint_retention=share("constraint"),
        open_item_retention=share("open"),
        goal_retention=share("goal"),
        done_retention=share("done"),
        reference_retention=share("reference"),
        series=series,
    )


def total_steps(kit: Kit, config: EvalConfig) -> int:
    per_needles = sum(
        _turns_for(kit, p, config.window, config.seed) + 20 + len(NEVER_SAID)
        for p in config.pressures
    )
    return len(STRATEGIES) * (per_needles + config.task_turns)


async def evaluate(
    kit: Kit, make: Factory, config: EvalConfig, progress: Progress = lambda _: None
) -> dict[str, Any]:
    """Every scenario for every strategy; the report as a JSON-ready dict."""
    needles = [
        (await run_needles(kit, make, name, pressure, config, progress)).as_dict()
        for pressure in config.pressures
        for name in STRATEGIES
    ]
    tasks = [(await run_task(kit, make, name, config, progress)).as_dict() for name in STRATEGIES]
    lines = budget_lines(kit, config.window)
    return {"config": asdict(config), "lines": lines, "needles": needles, "task": tasks}


async def evaluate_hard(ctx: ServiceContext, config: HardConfig) -> list[dict[str, Any]]:
    """The hard recall set (docs/RECALL.md) at each pressure, in-process, with the flat
    hybrid baseline and the embedder's ceiling on the same messages."""
    runs = []
    for pressure in tqdm(config.pressures, unit="pressure", desc="hard recall set"):
        run = await run_pressure(ctx, config, pressure, with_references=True)
        runs.append(
            {
                "pressure": pressure,
                "tokens": run.tokens,
                "rows": [asdict(r) for r in rows(run.outcomes)],
                "search_ms": percentiles(run.search_ms),
                "stable_prefix": asdict(run.prefix()),
            }
        )
    return runs


async def evaluate_chats(ctx: ServiceContext, config: ChatsConfig) -> dict[str, Any]:
    """The long-chats set (docs/RECALL.md), in-process, with the flat hybrid baseline."""
    with tqdm(unit="chat", desc="long chats") as bar:
        outcomes = await run_chats(ctx, config, bar.update)
    return {"window": config.window, "rows": [asdict(r) for r in chats_rows(outcomes)]}


async def evaluate_retention(ctx: ServiceContext, config: RetentionConfig) -> list[dict[str, Any]]:
    """The key-fact hit rate (app/evaluation/fact_retention.py), in-process."""
    conversations = config.chosen(load_set())
    found = await run_retention(
        ctx, conversations, window=config.window, pressures=config.pressures, label="eval-facts"
    )
    return [
        {
            **asdict(r),
            "hit_rate": r.hit_rate,
            "open_retention": r.open_retention,
            "window": config.window,
        }
        for r in found
    ]


async def run_eval(
    settings: Settings,
    config: EvalConfig,
    out: Path,
    database_url: str | None,
    server: str | None,
    api_key: str | None,
    command: str,
) -> None:
    """`ebbtide eval`: every strategy in this process, Ebbtide in-process on `database_url`
    or over HTTP against `server`; writes the report under `out`."""
    ctx = build_context(settings, database_url) if database_url else None
    kit = Kit(default_counter(), ctx.embedder if ctx else build_embedder(settings), settings)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    client = httpx.AsyncClient(base_url=server or "http://unused", headers=headers, timeout=120)

    def make(name: str, session: str) -> Strategy:
        if name == "truncation":
            return Truncation(kit, config.window)
        if name == "compaction":
            return CompactionOnly(kit, config.window)
        if name == "full_rag":
            return FullRag(kit, config.window)
        if ctx is not None:
            return EbbtideInProcess(ctx, config.window, session)
        return EbbtideOverHttp(client, config.window, session)

    try:
        with tqdm(total=total_steps(kit, config), unit="turn", desc="ebbtide eval") as bar:
            report = await evaluate(kit, make, config, bar.update)
        # The hard set calls the recall use case itself: in-process only (see docs/RECALL.md).
        report["hard"] = await evaluate_hard(ctx, config.hard) if ctx is not None else []
        report["chats"] = await evaluate_chats(ctx, config.chats) if ctx is not None else None
        report["stated_facts"] = [asdict(r) for r in extraction_rows(score_extraction(load_set()))]
        report["proposed_facts"] = [asdict(r) for r in headroom_rows(load_set())]
        report["fact_retention"] = (
            await evaluate_retention(ctx, config.retention) if ctx is not None else []
        )
    finally:
        await client.aclose()
        if ctx is not None:
            await ctx.aclose()
    write_report(report, out, command)
    print(f"ebbtide: report written to {out}/report.md")
