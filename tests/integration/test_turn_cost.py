"""What a turn costs the database and the embedder (docs/DESIGN.md §3–4): a turn that needs
nothing else is one transaction; the query is embedded once, only when the turn searches, and
not at all for an acknowledgement; facts stay bounded."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core import rewrite
from app.providers.fakes import CountingEmbedder
from app.services import turn_recall
from app.services.context import ServiceContext
from app.services.turns import run_turn
from app.store import statements
from tests.builders import user, words
from tests.conftest import make_settings
from tests.integration.test_recall import archive_facts, ask
from tests.integration.test_turn_invariants import turn_input

QUESTION = "What was the budget we agreed on for cloud servers?"


async def test_a_quiet_turn_reads_plans_and_writes_in_one_transaction(
    ctx: ServiceContext,
) -> None:
    await run_turn(ctx, turn_input("c1", [user("hello there")], context_window=8000))
    with statements.counting() as sent:
        response = await run_turn(ctx, turn_input("c1", [user("and another message")]))
    assert response.recall.skipped_reason == "archive_empty"
    assert sent.transactions == 1
    # The locked read of session and notes, the window, the facts; the messages, the
    # session row, the event: six statements, the floor's four plus the two reads. (The
    # tests' transaction is a savepoint: its SAVEPOINT and RELEASE are statements too.)
    assert sent.statements - 2 * sent.transactions == 6


async def test_a_turn_that_searches_lets_the_lock_go_while_it_recalls(
    ctx: ServiceContext, embedder: CountingEmbedder
) -> None:
    await archive_facts(ctx, "c2")
    with statements.counting() as sent:
        response = await ask(ctx, "c2", QUESTION)
    assert response.recall.hits
    # The locked read, one for each search channel, and the write that locks again.
    assert sent.transactions == 4


async def test_the_query_is_embedded_once_per_text_and_shared_with_the_early_start(
    ctx: ServiceContext, embedder: CountingEmbedder
) -> None:
    await archive_facts(ctx, "c3")
    before = embedder.query_calls
    first = await ask(ctx, "c3", QUESTION)
    assert first.recall.hits
    # Started before the read (this process saw the archive) and used by recall: one call.
    assert embedder.query_calls == before + 1
    await ask(ctx, "c3", QUESTION)
    assert embedder.query_calls == before + 1  # the same text again: from the cache


async def test_the_question_is_read_once_per_turn(
    ctx: ServiceContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The skip rules, the early embedding and the search share one reading of the question
    (they read it three times before)."""
    await archive_facts(ctx, "c5")
    reads: list[str] = []

    def counted(query: str, asked_at: object = None) -> rewrite.RewrittenQuery:
        reads.append(query)
        return rewrite.rewrite_alone(query, asked_at)  # type: ignore[arg-type]

    monkeypatch.setattr(turn_recall, "rewrite_alone", counted)
    response = await ask(ctx, "c5", QUESTION)
    assert response.recall.hits and reads == [QUESTION]


async def test_a_bare_reference_is_embedded_once_with_what_it_points_at(
    ctx: ServiceContext, embedder: CountingEmbedder
) -> None:
    """ "What about that one?" means nothing alone: it is not embedded before the read, and
    the search embeds it once, completed with the entities of the recent turns."""
    await archive_facts(ctx, "c6")
    await ask(ctx, "c6", "Compare the Hetzner and OVH offers for me.")
    before = embedder.query_calls
    response = await ask(ctx, "c6", "and what about the second one?")
    assert response.recall.query_rewritten is not None
    assert "OVH" in response.recall.query_rewritten
    assert embedder.query_calls == before + 1


async def test_an_acknowledgement_is_not_embedded_nor_searched(
    ctx: ServiceContext, embedder: CountingEmbedder
) -> None:
    await archive_facts(ctx, "c4")
    before = embedder.query_calls
    with statements.counting() as sent:
        response = await ask(ctx, "c4", "ok, thanks!")
    assert response.recall.skipped_reason == "acknowledgement"
    assert embedder.query_calls == before and sent.transactions == 1
    forced = await ask(ctx, "c4", "ok, thanks!", recall="force")
    assert forced.recall.skipped_reason != "acknowledgement"  # asked for: searched


async def test_past_the_bound_the_oldest_constraints_expire_and_stay_stored(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    ctx.settings = make_settings(notes={"max_active_per_kind": 4})
    for n in range(6):
        await run_turn(
            ctx,
            turn_input(
                "c5", [user(f"Never open gate number {n}. " + words(5, "pad"))], context_window=8000
            ),
        )
    rows = (
        await connection.execute(
            text(
                "SELECT text, status FROM facts WHERE session_id = 'local/c5' "
                "AND kind = 'constraint' ORDER BY id"
            )
        )
    ).all()
    assert [status for _, status in rows] == ["expired"] * 2 + ["active"] * 4
    assert "gate number 0" in rows[0][0]
    event = await connection.scalar(
        text(
            "SELECT payload FROM events WHERE session_id = 'local/c5' AND kind = 'turn' "
            "ORDER BY id DESC LIMIT 1"
        )
    )
    assert event["facts"]["expired"]  # the turn says which facts it retired
