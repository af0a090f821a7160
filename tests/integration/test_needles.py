"""Needle backfill on the real local embedder and the real Postgres (docs/DESIGN.md §10).

Twenty facts (ten Chinese, ten English) are planted in a conversation three times the
window, then asked back in natural language, some through references. A fact counts when the
prompt before the question shows it: quoted by a recalled block, or kept by the notes (whose
facts recall does not quote again).
"""

from __future__ import annotations

from app.core.messages import Message
from app.core.plan import TurnInput
from app.core.rerank import NO_MATCH_LINE
from app.core.rewrite import has_reference
from app.evaluation.scenarios import NEVER_SAID, needle_scenario, replay_needles
from app.providers.embedders import LocalEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.services.turns import run_turn
from app.settings import Settings
from app.store.database import Database

WINDOW = 6000
TURNS = 100  # about 18,600 tokens of conversation: 3.1 windows


def block_items_text(prompt: list[dict[str, object]]) -> str:
    return "\n".join(str(m["content"]) for m in prompt if m["role"] == "system")


async def test_needles_planted_before_offload_come_back_at_recall_5(database: Database) -> None:
    ctx = ServiceContext(
        database=database,
        counter=default_counter(),
        embedder=LocalEmbedder(),
        settings=Settings(database_url="postgresql://bound-in-tests"),
    )
    scenario = needle_scenario(turns=TURNS)
    conversation = sum(ctx.counter.count(m.text) for t in scenario.turns for m in t)
    assert conversation >= 3 * WINDOW
    results = await replay_needles(ctx, "needles", scenario, context_window=WINDOW)
    in_prompt = sum(r.in_prompt for r in results) / len(results)
    in_block = sum(r.in_block for r in results) / len(results)
    recall_1 = sum(r.top1 for r in results) / len(results)
    print(
        f"\nneedles: in the prompt {in_prompt:.2f} (recalled {in_block:.2f}, the rest in the "
        f"notes)  Recall@1 {recall_1:.2f}  ({len(results)} facts, {conversation} tokens, "
        f"window {WINDOW})"
    )
    for missed in (r for r in results if not r.in_prompt):
        print(f"  missed: {missed.needle.question}")
    assert in_prompt >= 0.90
    # Recall still brings back what the notes do not keep, and never quotes what they do.
    assert sum(r.in_block for r in results if not r.in_notes) >= 0.8 * sum(
        not r.in_notes for r in results
    )
    assert sum(has_reference(r.needle.question) for r in results) >= 5  # references covered

    for question in NEVER_SAID:
        response = await run_turn(
            ctx,
            TurnInput(
                session_id="needles",
                tenant_id="local",
                messages=[Message.of("user", question)],
                context_window=WINDOW,
            ),
        )
        # This turn's recall (the window may hold blocks the needle questions injected).
        assert response.recall.hits == (), question
        assert response.recall.no_match == has_reference(question), question
        if response.recall.no_match:
            assert NO_MATCH_LINE in block_items_text(response.messages)
