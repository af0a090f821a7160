"""Recall in the turn pipeline and the recall endpoint, on the real Postgres (hash embedder)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.formats import openai
from app.core.messages import Message
from app.core.rerank import NO_MATCH_LINE
from app.core.results import TurnResult
from app.providers.embedders import HashEmbedder
from app.providers.fakes import (
    CountingEmbedder,
    DownEmbedder,
    FailingReranker,
    HeldEmbedder,
    ScriptedReranker,
    SlowEmbedder,
)
from app.services.context import ServiceContext
from app.services.embedding import EmbedderGate
from app.services.recall import recall_query
from app.services.reembed import reembed
from app.services.turns import run_turn
from app.store.models import IdempotencyRow
from tests.builders import assistant, tool, user, words
from tests.conftest import make_settings
from tests.integration.test_turn_invariants import turn_input

# Details the notes do not keep (no number, no constraint or decision word): recall brings
# back what the prompt lacks, never what the notes already say (core.injection).
FACTS = [
    "The cloud server budget sits with Marta from finance, who reviews it every quarter.",
    "Orders ship from the Suzhou warehouse, the Guangzhou dock flooded last spring.",
    "库存查的是华东仓，华南仓去年搬迁以后系统一直对不上账。",
]
WINDOW = {"context_window": 3000, "policy": {"floor_turns": 2, "floor_tokens": 0}}


async def archive_facts(ctx: ServiceContext, session: str) -> None:
    """Plants the facts, then talks until they are offloaded."""
    for fact in FACTS:
        await run_turn(ctx, turn_input(session, [user(fact)], **WINDOW))
    for t in range(12):
        await run_turn(ctx, turn_input(session, [user(f"filler {t} " + words(120))], **WINDOW))


def recalled_block(response: TurnResult) -> str:
    """This turn's block: the newest in the prompt, when the turn injected one (the window
    may hold blocks earlier turns injected)."""
    blocks = [
        m["content"]
        for m in response.messages
        if m["role"] == "system" and "Earlier context recalled" in m["content"]
    ]
    return blocks[-1] if blocks and response.recall.injected_tokens else ""


async def ask(ctx: ServiceContext, session: str, question: str, **fields: Any) -> TurnResult:
    return await run_turn(ctx, turn_input(session, [user(question)], **fields))


async def test_an_offloaded_detail_comes_back_before_the_question(ctx: ServiceContext) -> None:
    await archive_facts(ctx, "r1")
    response = await ask(ctx, "r1", "What was the budget we agreed on for cloud servers?")
    block = recalled_block(response)
    assert FACTS[0] in block
    recall = response.recall
    assert recall.query_raw.startswith("What was the budget")
    assert recall.query_rewritten == "What was the budget for cloud servers?"
    assert recall.final_k == len(recall.hits) >= 1 and recall.injected_tokens > 0
    first = recall.hits[0]
    assert block.count(f"| {first.chunk_id}]") == 1
    assert response.messages[-1]["content"].startswith("What was the budget")
    assert response.messages[-2]["content"] == block


async def test_a_chinese_reference_question_finds_the_chinese_fact(ctx: ServiceContext) -> None:
    await archive_facts(ctx, "r2")
    response = await ask(ctx, "r2", "刚才说的库存查的是哪个仓？")
    assert FACTS[2] in recalled_block(response)


async def test_a_reference_with_no_match_injects_the_explicit_line(ctx: ServiceContext) -> None:
    await archive_facts(ctx, "r3")
    response = await ask(ctx, "r3", "What was the colour we agreed on for the logo?")
    assert response.recall.no_match is True
    assert NO_MATCH_LINE in recalled_block(response)


async def test_auto_mode_does_not_inject_unrelated_chunks(ctx: ServiceContext) -> None:
    await archive_facts(ctx, "r4")
    response = await ask(ctx, "r4", "the tulips in the park look lovely this spring")
    assert response.recall.hits == () and recalled_block(response) == ""
    assert response.recall.skipped_reason is None  # searched, and nothing held on its own
    thanks = await ask(ctx, "r4", "thanks, sounds good")
    assert thanks.recall.hits == () and thanks.recall.skipped_reason == "acknowledgement"


async def test_off_mode_and_turns_without_user_input_skip_recall(
    ctx: ServiceContext, embedder: CountingEmbedder
) -> None:
    await archive_facts(ctx, "r5")
    calls = embedder.query_calls
    off = await ask(ctx, "r5", "the budget we agreed on?", recall="off")
    assert off.recall.skipped_reason == "off"
    call = await run_turn(ctx, turn_input("r5", [assistant(None, [("c1", "lookup")])]))
    assert call.recall.skipped_reason == "no_user_input"
    result = await run_turn(ctx, turn_input("r5", [tool("c1", "done")]))
    assert result.recall.skipped_reason == "no_user_input"
    assert embedder.query_calls == calls


async def test_force_mode_recalls_without_a_reference_word(ctx: ServiceContext) -> None:
    await archive_facts(ctx, "r6")
    response = await ask(ctx, "r6", "Suzhou warehouse", recall="force")
    assert FACTS[1] in recalled_block(response)


async def test_embedder_down_during_recall_falls_back_to_lexical(ctx: ServiceContext) -> None:
    await archive_facts(ctx, "r7")
    ctx.embedder = DownEmbedder()
    response = await ask(ctx, "r7", "What was the budget we agreed on for cloud servers?")
    assert response.recall.fallback == "embedder_unavailable"
    assert FACTS[0] in recalled_block(response)
    assert all(hit.vector_score is None for hit in response.recall.hits)


async def test_a_stalled_embedder_is_timed_out_and_flagged(ctx: ServiceContext) -> None:
    await archive_facts(ctx, "r8")
    ctx.settings = make_settings(recall={"embed_timeout_s": 0.05})
    ctx.embedder = SlowEmbedder(delay_s=5)
    response = await ask(ctx, "r8", "What was the budget we agreed on for cloud servers?")
    assert response.recall.fallback == "embedder_unavailable"
    assert FACTS[0] in recalled_block(response)


async def test_a_failing_reranker_keeps_the_fusion_order_and_is_flagged(
    ctx: ServiceContext,
) -> None:
    await archive_facts(ctx, "r9")
    question = "What was the budget we agreed on for cloud servers?"
    ctx.reranker = FailingReranker()
    failed = await ask(ctx, "r9", question, recall="force")
    assert failed.recall.fallback == "reranker_failed"
    assert FACTS[0] in recalled_block(failed)


async def test_a_reranker_decides_the_order(ctx: ServiceContext) -> None:
    await archive_facts(ctx, "r10")
    reranker = ScriptedReranker(preferred="Guangzhou")
    ctx.reranker = reranker
    response = await ask(ctx, "r10", "What was the budget we agreed on for cloud servers?")
    assert reranker.calls == 1
    assert response.recall.fallback is None
    best = max(response.recall.hits, key=lambda hit: hit.score)
    assert best.score == 1.0


async def test_a_chunk_offloaded_by_this_turn_is_recallable_in_the_same_turn(
    ctx: ServiceContext,
) -> None:
    session = "r11"
    response = await run_turn(ctx, turn_input(session, [user(FACTS[1])], **WINDOW))
    for t in range(30):  # filler only, up to half the watermark's base
        if response.usage.watermark >= 0.5:
            break
        messages = [user(f"filler {t} {words(100)}")]
        response = await run_turn(ctx, turn_input(session, messages, **WINDOW))
    # One turn that crosses the offload line and asks: the question is said only here, so
    # no earlier copy of it in the archive can outrank the fact.
    long_filler = [user(f"long filler {part} {words(150)}") for part in range(3)]
    question_turn = [*long_filler, user("Remind me of the warehouse rule.")]
    response = await run_turn(ctx, turn_input(session, question_turn, **WINDOW))
    assert response.offload.triggered
    assert FACTS[1] in recalled_block(response)
    assert response.recall.hits[0].chunk_id in response.offload.chunk_ids


async def test_emergency_tightens_k(ctx: ServiceContext) -> None:
    ctx.settings = make_settings(recall={"top_k": 5, "emergency_top_k": 1})
    await archive_facts(ctx, "r12")
    burst = [user(f"part {i}: " + words(170)) for i in range(5)]
    burst.append(user("Suzhou Guangzhou budget warehouse cloud"))
    response = await run_turn(ctx, turn_input("r12", burst, recall="force"))
    assert response.usage.level == "emergency"
    assert response.recall.final_k <= 1
    usage = response.usage
    assert usage.prompt_tokens <= 0.95 * usage.watermark_base + usage.recall_share_tokens


async def test_reembed_picks_up_chunks_stored_while_the_embedder_was_down(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    ctx.embedder = DownEmbedder()
    ctx.embedder_gate = EmbedderGate.from_settings(
        make_settings(embedder={"breaker_open_s": 0.05}).embedder
    )
    await archive_facts(ctx, "r13")
    pending = await connection.scalar(
        text("SELECT count(*) FROM chunks WHERE session_id = 'local/r13' AND needs_embedding")
    )
    assert pending and pending > 0
    ctx.embedder = DownEmbedder()
    assert (await reembed(ctx, "local/r13", now=True)).stopped_by is not None
    ctx.embedder = HashEmbedder()
    await asyncio.sleep(0.1)  # the failures opened the breaker; after it, one call probes
    report = await reembed(ctx, "local/r13", now=True)
    assert report.embedded == report.queued == pending and report.stopped_by is None
    left = await connection.scalar(
        text(
            "SELECT count(*) FROM chunks WHERE session_id = 'local/r13' "
            "AND (needs_embedding OR embedding IS NULL OR embedding_model <> :m)"
        ),
        {"m": HashEmbedder.model_name},
    )
    assert left == 0
    response = await ask(ctx, "r13", "What was the budget we agreed on for cloud servers?")
    assert response.recall.fallback is None
    assert any(hit.vector_score is not None for hit in response.recall.hits)


async def test_vectors_of_another_model_are_never_compared(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    await archive_facts(ctx, "r14")
    for table in ("chunks", "chunk_units"):
        await connection.execute(
            text(f"UPDATE {table} SET embedding_model = 'other' WHERE session_id = 'local/r14'")
        )
    response = await ask(ctx, "r14", "What was the budget we agreed on for cloud servers?")
    hits = response.recall.hits
    assert hits and all(hit.vector_score is None for hit in hits)  # lexical only
    queued = await reembed(ctx, "local/r14")  # into the queue: nothing embedded yet
    assert queued.queued > 0 and queued.embedded == 0
    heard: list[tuple[str, int, int | None]] = []

    def progress(stage: str, done: int, total: int | None = None) -> None:
        heard.append((stage, done, total))

    now = await reembed(ctx, "local/r14", now=True, progress=progress)
    assert now.embedded == queued.queued
    # the command's progress: the total first, then every batch's chunks
    assert heard[0] == ("embed queued chunks", 0, queued.queued)
    assert sum(done for _, done, _ in heard) == now.embedded and len(heard) > 1


async def test_recall_endpoint_returns_capped_raw_text_or_no_match(
    ctx: ServiceContext, client: httpx.AsyncClient
) -> None:
    await archive_facts(ctx, "r15")
    answer = await client.post(
        "/sessions/r15/recall", json={"query": "cloud server budget", "top_k": 2}
    )
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert 1 <= len(found["results"]) <= 2 and found["no_match"] is False
    assert any(FACTS[0] in item["text"] for item in found["results"])
    assert all(item["tokens"] <= ctx.settings.recall.per_chunk_tokens for item in found["results"])
    none = (await client.post("/sessions/r15/recall", json={"query": "zeppelin"})).json()
    assert none["results"] == [] and none["no_match"] and none["message"] == "no match"
    missing = await client.post("/sessions/nobody/recall", json={"query": "x"})
    assert missing.status_code == 404
    bad = await client.post("/sessions/r15/recall", json={"query": ""})
    assert bad.status_code == 422


async def test_hits_without_room_are_not_reported_as_no_match(ctx: ServiceContext) -> None:
    await archive_facts(ctx, "r16")
    ctx.settings = make_settings(recall={"budget_tokens": 0})
    response = await ask(ctx, "r16", "What was the budget we agreed on for cloud servers?")
    assert response.recall.skipped_reason == "no_room_in_budget"
    assert response.recall.no_match is False and recalled_block(response) == ""


async def test_a_retried_turn_with_recall_hits_gets_the_first_body_back(
    ctx: ServiceContext, client: httpx.AsyncClient, connection: AsyncConnection
) -> None:
    await archive_facts(ctx, "replay")
    body = {
        "messages": [openai.as_json(user("What was the budget we agreed on for cloud servers?"))],
        **WINDOW,
    }
    headers = {"Idempotency-Key": "q1"}
    first = await client.post("/sessions/replay/turn", json=body, headers=headers)
    again = await client.post("/sessions/replay/turn", json=body, headers=headers)
    assert first.json()["recall"]["hits"] and again.json() == first.json()
    # A row written before answers were kept as typed results holds the response body itself.
    await connection.execute(
        update(IdempotencyRow)
        .where(IdempotencyRow.session_id == "local/replay", IdempotencyRow.key == "q1")
        .values(response=first.json())
    )
    older = await client.post("/sessions/replay/turn", json=body, headers=headers)
    assert older.json() == first.json()


async def test_a_turn_that_finds_the_embedder_busy_recalls_lexically_at_once(
    ctx: ServiceContext,
) -> None:
    await archive_facts(ctx, "r16")
    held = HeldEmbedder()
    ctx.embedder = held
    ctx.embedder_gate = EmbedderGate.from_settings(
        make_settings(embedder={"query_capacity": 1}).embedder
    )
    other = asyncio.create_task(
        ctx.embedder_gate.query("globex", lambda: held.embed_query("x"), 60)
    )
    await asyncio.sleep(0.01)
    response = await ask(ctx, "r16", "What was the budget we agreed on for cloud servers?")
    assert response.recall.fallback == "embedder_busy"
    assert held.calls == 1  # only the other tenant's call reached the embedder
    assert FACTS[0] in recalled_block(response)  # the lexical channel still finds the fact
    held.released.set()
    assert (await other)[1] is None


async def test_the_same_question_on_the_same_archive_gets_the_same_answer(
    ctx: ServiceContext,
) -> None:
    """Below `exact_max_units` the session's units are scanned exactly: other sessions
    writing between two searches (which reshapes a shared HNSW graph) change nothing."""
    await archive_facts(ctx, "r20")
    question = "What was the budget we agreed on for cloud servers?"
    first = await recall_query(ctx, "local", "r20", question, 5)
    await archive_facts(ctx, "r21")
    second = await recall_query(ctx, "local", "r20", question, 5)
    assert first.results and [r.chunk_id for r in first.results] == [
        r.chunk_id for r in second.results
    ]
    assert [r.score for r in first.results] == [r.score for r in second.results]


async def test_a_named_day_is_a_hint_not_a_wall(ctx: ServiceContext) -> None:
    monday = datetime(2026, 3, 9, 12, 0, tzinfo=UTC)
    said = [
        ("Fixed the dripping tap in the kitchen with a new washer.", monday),
        ("The wobbly stair still needs fixing, maybe next month.", monday + timedelta(days=5)),
    ]
    for content, at in said:
        message = Message.of("user", content, created_at=at)
        await run_turn(ctx, turn_input("r22", [message], **WINDOW))
    for t in range(12):
        later = monday + timedelta(days=6, hours=t)
        filler = Message.of("user", f"filler {t} " + words(120), created_at=later)
        await run_turn(ctx, turn_input("r22", [filler], **WINDOW))
    asked = monday + timedelta(days=20)
    on_the_day = await recall_query(
        ctx, "local", "r22", "What repair did I do in the kitchen on 9 March?", 5, asked_at=asked
    )
    assert on_the_day.results and "washer" in on_the_day.results[0].text
    assert all(r.ts.date() == monday.date() for r in on_the_day.results)
    # Nothing at all was said on 2 March: the rest answer, by the usual floors.
    nothing_said = await recall_query(
        ctx, "local", "r22", "What repair did I do in the kitchen on 2 March?", 5, asked_at=asked
    )
    assert nothing_said.results and "washer" in nothing_said.results[0].text
    assert nothing_said.message is None


async def test_history_posted_without_times_still_answers_a_named_day(
    ctx: ServiceContext,
) -> None:
    """Imported history: no message carries its time, so every chunk holds the moment it was
    posted; a question about "last Friday" is answered from them all."""
    await run_turn(
        ctx, turn_input("r23", [user("Fixed the kitchen tap with a new washer.")], **WINDOW)
    )
    for t in range(12):
        await run_turn(ctx, turn_input("r23", [user(f"filler {t} " + words(120))], **WINDOW))
    asked = ctx.clock() + timedelta(days=30)
    found = await recall_query(
        ctx, "local", "r23", "What did I fix in the kitchen last Friday?", 5, asked_at=asked
    )
    assert found.results and "washer" in found.results[0].text
