"""`ebbtide eval --quick` in-process, on the real local embedder and Postgres: it asserts
behaviour (not time), as docs/DESIGN.md §10 asks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from app.evaluation.baselines import (
    CompactionOnly,
    EbbtideInProcess,
    EbbtideOverHttp,
    FullRag,
    Kit,
    Strategy,
    Truncation,
)
from app.evaluation.report import write_report
from app.evaluation.run import EvalConfig, evaluate, run_needles
from app.main import create_app
from app.providers.embedders import LocalEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.settings import Settings
from app.store.database import Database


def local_strategies(kit: Kit, ctx: ServiceContext, window: int) -> Any:
    def make(name: str, session: str) -> Strategy:
        if name == "truncation":
            return Truncation(kit, window)
        if name == "compaction":
            return CompactionOnly(kit, window)
        if name == "full_rag":
            return FullRag(kit, window)
        return EbbtideInProcess(ctx, window, session)

    return make


async def test_quick_eval_holds_the_protocols_bars(database: Database, tmp_path: Path) -> None:
    settings = Settings(database_url="postgresql://bound-in-tests")
    ctx = ServiceContext(
        database=database, counter=default_counter(), embedder=LocalEmbedder(), settings=settings
    )
    kit = Kit(ctx.counter, ctx.embedder, settings)
    config = EvalConfig.quick()
    report = await evaluate(kit, local_strategies(kit, ctx, config.window), config)

    needles = {(r["strategy"], r["pressure"]): r for r in report["needles"]}
    ebbtide = needles[("ebbtide", 3)]
    print(
        "\nquick eval at 3×: "
        + ", ".join(
            f"{name} {needles[(name, 3)]['recall_at_5']:.2f}"
            for name in ("truncation", "compaction", "full_rag", "ebbtide")
        )
    )
    assert ebbtide["recall_at_5"] >= 0.85
    for name in ("truncation", "compaction", "full_rag"):
        assert ebbtide["recall_at_5"] >= needles[(name, 3)]["recall_at_5"], name
    for pressure in config.pressures:  # the harness is honest: dropped is dropped
        assert needles[("truncation", pressure)]["recall_far"] in (0.0, None)
    assert ebbtide["guard_rate"] == 1.0
    task = {r["strategy"]: r for r in report["task"]}
    for kept in ("constraint", "open_item", "goal", "done", "reference"):
        assert task["ebbtide"][f"{kept}_retention"] == 1.0, kept
    assert task["truncation"]["constraint_retention"] < 1.0

    lines = report["lines"]  # what the prompt-tokens plot draws
    assert lines["offload_at"] < lines["emergency_at"] < lines["budget"] < lines["window"]
    for run in report["needles"]:  # the recall plot's sample sizes and intervals
        assert run["questions"] > 0
        assert run["hits"] / run["questions"] == pytest.approx(run["recall_at_5"], abs=1e-4)

    write_report(report, tmp_path, "ebbtide eval --quick")
    assert_report_files(tmp_path)


def assert_report_files(out: Path) -> None:
    assert {p.name for p in out.iterdir()} == {
        "report.json",
        "report.md",
        "recall_vs_pressure.png",
        "prompt_tokens.png",
    }
    assert (out / "prompt_tokens.png").read_bytes().startswith(b"\x89PNG")
    assert "| 3× | ebbtide |" in (out / "report.md").read_text()


async def test_the_ebbtide_strategy_also_runs_against_a_server_over_http(
    ctx: ServiceContext,
) -> None:
    kit = Kit(ctx.counter, ctx.embedder, ctx.settings)
    transport = httpx.ASGITransport(app=create_app(context=ctx))
    async with httpx.AsyncClient(transport=transport, base_url="http://ebbtide.test") as client:
        run = await run_needles(
            kit,
            lambda name, session: EbbtideOverHttp(client, 3000, session),
            "ebbtide",
            1,
            EvalConfig.quick(),
            lambda _: None,
        )
    assert run.series.prompt_tokens and run.recall_at_5 > 0
