"""Between offloads each prompt extends the one before (docs/DESIGN.md §1): a recalled block
stays where it was injected, as history, and is never injected twice."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.results import TurnResult
from app.core.scopes import Scope
from app.evaluation.prefix import PrefixTracker
from app.services.auth import Principal
from app.services.context import ServiceContext
from app.services.memory import confirm_forget, request_forget
from app.services.recall import recall_query
from app.services.turns import run_turn
from tests.builders import assistant, user, words
from tests.integration.test_recall import FACTS, ask
from tests.integration.test_turn_invariants import turn_input

QUESTIONS = [
    "What is the cloud server budget per quarter?",
    "Which warehouse do we ship from?",
    "Remind me: the cloud server budget per quarter?",
]


def recall_blocks(response: TurnResult) -> list[str]:
    return [
        m["content"]
        for m in response.messages
        if m["role"] == "system" and m["content"].startswith("## Earlier context recalled")
    ]


# Room for recall beside what is held: a window where one block does not fill it.
WINDOW = {"context_window": 16_000, "policy": {"floor_turns": 2, "floor_tokens": 0}}


async def converse(ctx: ServiceContext, session: str) -> list[TurnResult]:
    """Questions with the assistant's replies between them, after the facts are archived."""
    for fact in FACTS:
        await run_turn(ctx, turn_input(session, [user(fact)], **WINDOW))
    for t in range(120):
        said = [user(f"filler {t} " + words(120))]  # recall off: nothing held before asking
        filler = await run_turn(ctx, turn_input(session, said, recall="off", **WINDOW))
        if filler.offload.triggered:
            break
    assert filler.offload.triggered
    answers = []
    for index, question in enumerate(QUESTIONS):
        said = [assistant(f"Answer {index}."), user(question)] if index else [user(question)]
        answers.append(await run_turn(ctx, turn_input(session, said, **WINDOW)))
    return answers


async def test_a_block_stays_where_it_was_injected_and_later_prompts_extend_it(
    ctx: ServiceContext,
) -> None:
    first, second, third = await converse(ctx, "ao1")
    assert not second.offload.triggered and not third.offload.triggered
    assert first.recall.hits and FACTS[0] in recall_blocks(first)[0]
    for before, after in ((first, second), (second, third)):
        assert after.messages[: len(before.messages)] == before.messages  # extends it
    assert second.recall.held_tokens == first.recall.injected_tokens > 0


async def test_a_chunk_already_held_in_the_window_is_not_injected_again(
    ctx: ServiceContext,
) -> None:
    first, _, third = await converse(ctx, "ao2")
    held = {hit.chunk_id for hit in first.recall.hits}
    assert held and not held & {hit.chunk_id for hit in third.recall.hits}
    assert sum(FACTS[0] in block for block in recall_blocks(third)) == 1  # there once
    again = await recall_query(ctx, "local", "ao2", QUESTIONS[0], None, skip_injected=True)
    assert set(again.already_in_context) & held  # the memory tool is told it is in context


async def test_an_offload_clears_the_held_blocks(ctx: ServiceContext) -> None:
    first, *_ = await converse(ctx, "ao3")
    assert first.recall.hits
    response = first
    for t in range(30):
        response = await ask(ctx, "ao3", f"filler {t} " + words(120), **WINDOW)
        if response.offload.triggered:
            break
    assert response.offload.triggered
    assert response.recall.held_tokens == 0
    assert FACTS[0] not in "".join(recall_blocks(response))


async def test_forgetting_a_chunk_drops_the_held_block_that_quotes_it(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    first, *_ = await converse(ctx, "ao4")
    chunk_id = first.recall.hits[0].chunk_id
    caller = Principal("local", frozenset(Scope))
    pending = await request_forget(
        ctx, caller, "ao4", chunk_id=chunk_id, turn_start=None, turn_end=None
    )
    await confirm_forget(ctx, caller, "ao4", pending.pending_id)
    quoting = await connection.scalar(
        text(
            "SELECT count(*) FROM messages WHERE session_id = 'local/ao4' "
            "AND :chunk = ANY(recalled_chunk_ids)"
        ),
        {"chunk": chunk_id},
    )
    assert quoting == 0
    after = await ask(ctx, "ao4", "and now?", **WINDOW)
    assert FACTS[0] not in "".join(recall_blocks(after))


async def test_an_ordinary_conversation_reuses_its_prompt_from_turn_to_turn(
    ctx: ServiceContext,
) -> None:
    """Small talk with facts in it and a question about an earlier one every fifth turn, in a
    window it fills several times over: on the turns without an offload, the median share
    of each prompt a provider's cache could reuse from the previous one."""
    tracker = PrefixTracker(ctx.counter.count)
    reply = None
    for t in range(120):
        said = f"On day {t} we talked about this: " + words(40, f"d{t}x")  # words of its own
        if t % 5 == 4:
            said = f"What did we say about {FACTS[t % 2].split()[1]} earlier?"
        elif t % 9 == 0:
            said = FACTS[t % 2]
        messages = [reply, user(said)] if reply else [user(said)]
        response = await run_turn(ctx, turn_input("ao5", messages, **WINDOW))
        tracker.record(response.messages, offloaded=response.offload.triggered)
        reply = assistant(f"Noted, {t}. " + words(25, "ok"))
    report = tracker.report()
    print(f"\nordinary conversation, window 8,000: {report}")
    assert report.offload_turns >= 2 and report.steady_turns >= 100
    assert report.steady_median is not None and report.steady_median >= 0.95, report
    assert report.steady_extending is not None and report.steady_extending >= 0.95, report
