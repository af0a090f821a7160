"""The turn pipeline against the real embedded Postgres: docs/DESIGN.md §1 invariants."""

from __future__ import annotations

import random
from collections.abc import Iterator

from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.messages import Message
from app.core.plan import TurnInput
from app.providers.fakes import CountingEmbedder
from app.services.context import ServiceContext
from app.services.turns import run_turn
from tests.builders import assistant, tool, user
from tests.integration.helpers import chunk_texts, message_texts

WORDS = [
    "alpha",
    "delta",
    "kilo",
    "warehouse",
    "invoice",
    "只查",
    "华东仓",
    "库存",
    "不要",
    "tango",
    "42",
    "3.5kg",
    "order-17",
    "report",
]


def filler(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


def scripted_turns(seed: int, turns: int) -> Iterator[list[Message]]:
    """A conversation with replies, tool calls, oversize tool output, Chinese and English."""
    rng = random.Random(seed)
    for t in range(turns):
        messages: list[Message] = []
        if t:
            messages.append(assistant(f"answer {t}: {filler(rng, rng.randint(5, 120))}"))
        if rng.random() < 0.3:
            call = f"call_{t}"
            messages.append(assistant(None, [(call, "search")]))
            size = 2500 if rng.random() < 0.2 else rng.randint(10, 150)
            output = "\n".join(f"row {i} {filler(rng, 8)}" for i in range(size // 8))
            messages.append(tool(call, f"result {t}\n{output}"))
        messages.append(user(f"question {t}: {filler(rng, rng.randint(5, 200))}"))
        yield messages


def turn_input(session_id: str, messages: list[Message], **fields: object) -> TurnInput:
    return TurnInput(session_id=session_id, tenant_id="local", messages=messages, **fields)  # type: ignore[arg-type]


async def assert_every_message_recoverable(
    connection: AsyncConnection, session_id: str, posted: list[Message]
) -> None:
    rows = await message_texts(connection, session_id)
    chunks = await chunk_texts(connection, session_id)
    assert [row[0] for row in rows] == list(range(1, len(posted) + 1))
    window_calls: set[str] = set()
    for (seq, state, content, chunk_id, stub_chunk_id), original in zip(rows, posted, strict=True):
        needle = original.text or f'"id": "{original.calls[0].id}"'
        holders = [cid for cid, raw in chunks.items() if needle in raw]
        if stub_chunk_id is not None:
            assert holders == [stub_chunk_id], f"seq {seq}: oversize text must be in its chunk"
        elif state == "window":
            assert content == original.text, f"seq {seq}: window text changed"
            assert holders == [], f"seq {seq}: a window message is also in a chunk"
        else:
            assert content is None, f"seq {seq}: offloaded text kept twice"
            assert holders == [chunk_id], f"seq {seq}: must be in exactly its chunk"
        if state == "window":
            window_calls.update(c.id for c in original.calls)
            for call_id in original.answered_ids:
                assert call_id in window_calls, f"seq {seq}: tool group split"


async def test_every_posted_message_stays_recoverable_verbatim(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    posted: list[Message] = []
    offloads = 0
    for index, messages in enumerate(scripted_turns(seed=7, turns=70)):
        response = await run_turn(ctx, turn_input("inv", messages, context_window=6000))
        posted.extend(messages)
        offloads += response.offload.triggered
        usage = response.usage
        limit = 0.95 * usage.watermark_base + usage.recall_share_tokens
        assert usage.prompt_tokens <= min(limit, usage.budget), f"turn {index}: {usage}"
        if index % 10 == 9:
            await assert_every_message_recoverable(connection, "inv", posted)
    await assert_every_message_recoverable(connection, "inv", posted)
    assert offloads >= 5


async def test_turns_below_the_watermark_do_no_embedding_work(
    ctx: ServiceContext, embedder: CountingEmbedder
) -> None:
    for t in range(5):
        response = await run_turn(ctx, turn_input("calm", [user(f"short {t}")], model="gpt-4o"))
        assert response.usage.level == "normal"
        assert response.recall.skipped_reason == "archive_empty"
    assert embedder.passage_calls == 0 and embedder.query_calls == 0
