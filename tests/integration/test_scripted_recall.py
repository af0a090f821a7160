"""The scripted conversations of docs/RECALL.md on the real local embedder and Postgres:
what a user notices of recall, in English and Chinese (app/evaluation/scripted.py).

- A code word told at the start, then weeks of someone else's small talk: asked for it, the
  memory tool's recall lists it first and the turn puts it in the prompt; turns about topics
  never discussed inject nothing.
- A conversation that keeps to one theme and never asks about the past: recall spends (almost)
  nothing on it, at most 5 % of R per turn.
Shorter than the eval's (80 and 60 turns against 160 and 120) to keep the suite fast; the
eval's figures are in docs/RECALL.md.
"""

from __future__ import annotations

from app.evaluation.scripted import run_scripted
from app.providers.embedders import LocalEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.settings import Settings
from app.store.database import Database

WINDOW = 3000
MAX_THEME_SHARE_OF_R = 0.05


async def test_a_code_word_comes_back_and_a_repeating_theme_costs_nothing(
    database: Database,
) -> None:
    ctx = ServiceContext(
        database=database,
        counter=default_counter(),
        embedder=LocalEmbedder(),
        settings=Settings(database_url="postgresql://bound-in-tests"),
    )
    report = await run_scripted(ctx, WINDOW, "ci", code_word_turns=80, theme_turns=60)
    for outcome in report.code_word:
        print(outcome)
        assert outcome.archived, outcome  # asked once it had left the window
        assert outcome.recall_rank == 1 and outcome.in_prompt, outcome
        # Asked as turns, topics never discussed inject nothing. Through `POST /recall` they
        # still return their nearest chunks here (docs/RECALL.md: 0 of 3 told "no match" in
        # this 80-turn form; 2 of 3 in the eval's 160-turn one).
        assert outcome.never_discussed_injected == 0, outcome
    for theme in report.theme:
        print(theme, f"share of R {theme.share_of_r:.3f}")
        assert theme.turns_after_offload >= 20, theme
        assert theme.share_of_r <= MAX_THEME_SHARE_OF_R, theme
