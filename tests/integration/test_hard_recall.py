"""The hard recall set in its quick form (docs/RECALL.md): the local embedder, the real
Postgres, window 3,000 at three times the window. The floors sit a little below what the
quick run measured, so a change that loses recall fails here before it reaches the eval."""

from __future__ import annotations

from functools import cache

from app.evaluation.hard_recall import HardConfig, markdown, rows, run_pressure
from app.evaluation.oracle import with_oracle
from app.providers.embedders import LocalEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.settings import Settings
from app.store.database import Database
from tests.memo_embedder import MemoEmbedder

# Measured on the build machine (docs/RECALL.md, quick form, 2026-12-01): Recall@5 en 0.86,
# zh 0.84; dated 0.77 / 0.46; needle in prompt en 0.38, zh 0.17; false injection 0.20; twins
# told "no match" 0.14. The floors sit below, so run-to-run jitter never fails them. Since a
# turn's recalled block keeps within R (2026-12-02; 337 tokens in this 3,000-token window,
# where B alone allowed 1,500), needle in prompt measures en 0.25, zh 0.17, false injection
# 0.17, Recall@5 en 0.84, zh 0.83. Where an offload's batch ends moves the chunk boundaries, and
# those alone move Recall@5 by a few needles (2026-12-03, same build but for the notes' room in
# the batch: none 0.83 / 0.82, the notes' draft 0.78 / 0.83, their cap 0.78 / 0.78; the
# embedder's ceiling 0.60 / 0.75 in all three): the floors sit below that spread. 2026-12-05,
# confidence best first (issue 32): Recall@5 en 0.86, zh 0.79; dated 0.77 / 0.46; in prompt en
# 0.33, zh 0.16; false injection 0.20; twins told "no match" 0.15. Until 2026-12-07 the
# questions' order came from each session's random suffix, so false injection moved between
# 0.24 and 0.283 from one run to the next with recall unchanged; one order per seed now:
# false injection 0.24, in prompt 0.28, Recall@5 0.83 (flat 0.47) in two runs out of two.
FLOORS = {  # group: (Recall@5 through recall, needle in prompt)
    "en": (0.75, 0.20),
    "zh": (0.75, 0.10),
    "en dated": (0.45, 0.0),
    "zh dated": (0.35, 0.0),
}
MAX_FALSE_INJECTION = 0.28
MIN_TWIN_NO_MATCH = 0.10
# The scripted LLM (rewrite and judge) wrong on a tenth of its calls, same quick form:
# Recall@5 en 0.91, zh 0.92; needle in prompt 0.91 / 0.92; false injection 0.08.
ORACLE_ERROR_RATE = 0.1
ORACLE_RECALL_AT_5 = 0.87
ORACLE_IN_PROMPT = 0.85
ORACLE_MAX_FALSE_INJECTION = 0.13


@cache
def remembering_local_embedder() -> MemoEmbedder:
    """Both tests post the same conversations: the local model embeds each text once."""
    return MemoEmbedder(LocalEmbedder())


def local_context(database: Database) -> ServiceContext:
    return ServiceContext(
        database=database,
        counter=default_counter(),
        embedder=remembering_local_embedder(),
        settings=Settings(database_url="postgresql://bound-in-tests"),
    )


async def test_the_hard_set_keeps_its_floors(database: Database) -> None:
    ctx = local_context(database)
    config = HardConfig.quick()
    run = await run_pressure(ctx, config, config.pressures[0], with_references=True)
    table = {row.group: row for row in rows(run.outcomes)}
    print("\n" + markdown(config.pressures[0], list(table.values())))
    embedder = remembering_local_embedder()
    print(f"embedding {embedder.seconds:.0f} s, {embedder.misses} texts, {embedder.hits} again")
    for group, (recall_5, in_prompt) in FLOORS.items():
        row = table[group]
        assert row.recall_at_5 is not None and row.recall_at_5 >= recall_5, row
        assert row.in_prompt >= in_prompt, row
    for language in ("en", "zh"):  # the service adds to the embedder, never loses
        row = table[language]
        assert row.recall_at_5 is not None and row.ceiling_at_5 is not None
        # 2026-12-05: zh fell to 0.737 against the ceiling's 0.750 and zh dated to 0.15; the
        # cause was the calibrated confidence floor applied within a named day, not jitter.
        assert row.recall_at_5 >= row.ceiling_at_5, row
    assert table["all"].false_injection <= MAX_FALSE_INJECTION
    assert table["all"].twin_no_match >= MIN_TWIN_NO_MATCH
    assert table["all"].archived == table["all"].needles  # every fact had left the window


async def test_a_judge_and_a_rewriter_that_err_still_lift_recall(database: Database) -> None:
    """The LLM path end to end with the scripted LLM of `app/evaluation/oracle.py`, wrong on
    a tenth of its calls: its judgement must reach both the recall results and the prompt,
    above what the local path measures in the same form (the figures in the comment above)."""
    ctx = with_oracle(local_context(database), "both", error_rate=ORACLE_ERROR_RATE)
    config = HardConfig.quick()
    run = await run_pressure(ctx, config, config.pressures[0], with_references=False)
    table = {row.group: row for row in rows(run.outcomes)}
    print("\n" + markdown(config.pressures[0], list(table.values())))
    for language in ("en", "zh"):
        row = table[language]
        assert row.recall_at_5 is not None and row.recall_at_5 >= ORACLE_RECALL_AT_5, row
        assert row.in_prompt >= ORACLE_IN_PROMPT, row
    assert table["all"].false_injection <= ORACLE_MAX_FALSE_INJECTION
