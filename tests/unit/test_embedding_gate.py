"""Admission to the embedder: a bounded share per tenant, slots held until the work ends,
and a breaker that makes a down embedder cost one timeout, not one per call."""

from __future__ import annotations

import asyncio

from app.providers.fakes import DownEmbedder, HeldEmbedder
from app.services.context import ArchiveHint
from app.services.embedding import (
    EMBEDDER_BUSY,
    EMBEDDER_UNAVAILABLE,
    CircuitBreaker,
    EmbedderGate,
    QueryVectorCache,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def gate(capacity: int = 3, per_tenant: int = 2, clock: FakeClock | None = None) -> EmbedderGate:
    breaker = CircuitBreaker(failures_to_open=2, open_for_s=30, clock=clock or FakeClock())
    return EmbedderGate(capacity, per_tenant, breaker)


async def test_a_tenant_gets_its_share_and_no_more_while_others_still_get_in() -> None:
    embedder, admission = HeldEmbedder(), gate()
    held = [
        asyncio.create_task(admission.query("loud", lambda: embedder.embed_query("q"), 60))
        for _ in range(2)
    ]
    await asyncio.sleep(0)
    assert await admission.query("loud", lambda: embedder.embed_query("q"), 60) == (
        None,
        EMBEDDER_BUSY,
    )
    quiet = asyncio.create_task(admission.query("quiet", lambda: embedder.embed_query("q"), 60))
    await asyncio.sleep(0)
    refused = await admission.query("third", lambda: embedder.embed_query("q"), 60)
    assert refused == (None, EMBEDDER_BUSY)  # the process-wide capacity of 3 is taken
    await asyncio.sleep(0.01)
    assert embedder.calls == 3 and sum(admission.in_flight.values()) == 3  # refusals: none
    embedder.released.set()
    for task in [*held, quiet]:
        vector, fallback = await task
        assert vector is not None and fallback is None
    assert sum(admission.in_flight.values()) == 0


async def test_a_timed_out_call_keeps_its_slot_until_its_work_ends() -> None:
    embedder, admission = HeldEmbedder(), gate(capacity=1)
    timed_out = await admission.query("a", lambda: embedder.embed_query("q"), 0.01)
    assert timed_out == (None, EMBEDDER_UNAVAILABLE)
    assert admission.in_flight["a"] == 1  # the work goes on: its slot is still taken
    assert (await admission.query("b", lambda: embedder.embed_query("q"), 0.01))[1] == (
        EMBEDDER_BUSY
    )
    embedder.released.set()
    await asyncio.sleep(0.01)
    assert admission.in_flight["a"] == 0


async def test_the_breaker_refuses_a_down_embedder_until_a_probe_succeeds() -> None:
    clock, down = FakeClock(), DownEmbedder()
    admission = gate(clock=clock)
    calls = 0

    async def failing() -> list[float]:
        nonlocal calls
        calls += 1
        return await down.embed_query("q")

    for _ in range(2):
        assert await admission.query("a", failing, 1) == (None, EMBEDDER_UNAVAILABLE)
    assert await admission.passages(failing, 1) == (None, EMBEDDER_UNAVAILABLE)
    assert calls == 2  # open: the third call never reached the embedder
    clock.now = 31.0
    working = HeldEmbedder()
    working.released.set()
    vector, fallback = await admission.query("a", lambda: working.embed_query("q"), 1)
    assert vector is not None and fallback is None  # the probe closed the breaker
    vectors, fallback = await admission.passages(lambda: working.embed_passages(["p"]), 1)
    assert vectors is not None and len(vectors) == 1 and fallback is None


async def test_a_query_vector_is_embedded_once_and_shared_while_in_flight() -> None:
    cache = QueryVectorCache(size=2)
    calls: list[str] = []
    release = asyncio.Event()

    async def embed(text: str) -> tuple[list[float] | None, str | None]:
        calls.append(text)
        await release.wait()
        return [float(len(text))], None

    key = cache.key("model", "budget?")
    first = asyncio.ensure_future(cache.get(key, lambda: embed("budget?")))
    second = asyncio.ensure_future(cache.get(key, lambda: embed("budget?")))
    await asyncio.sleep(0)
    first.cancel()  # an early start abandoned: the call goes on for the others
    release.set()
    assert await second == ([7.0], None)
    assert await cache.get(key, lambda: embed("budget?")) == ([7.0], None)
    assert calls == ["budget?"]


async def test_a_refused_query_is_not_kept_and_old_entries_make_room() -> None:
    cache = QueryVectorCache(size=1)
    answers: list[tuple[list[float] | None, str | None]] = [(None, "embedder_busy"), ([1.0], None)]

    async def embed() -> tuple[list[float] | None, str | None]:
        return answers.pop(0)

    key = cache.key("model", "q")
    assert await cache.get(key, embed) == (None, "embedder_busy")
    assert await cache.get(key, embed) == ([1.0], None)  # asked the embedder again
    other = cache.key("model", "another")
    assert await cache.get(other, lambda: _answer([2.0])) == ([2.0], None)
    assert await cache.get(key, lambda: _answer([3.0])) == ([3.0], None)  # evicted: embedded anew
    assert cache.key("model", "q") != cache.key("other-model", "q")


async def _answer(vector: list[float]) -> tuple[list[float] | None, str | None]:
    return vector, None


def test_the_archive_hint_keeps_the_newest_sessions() -> None:
    hint = ArchiveHint(size=2)
    for key in ("a", "b", "c"):
        hint.add(key)
    assert "a" not in hint and "b" in hint and "c" in hint
    hint.discard("b")
    hint.discard("never-seen")
    assert "b" not in hint
