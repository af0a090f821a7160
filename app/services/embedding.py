"""Admission to the embedder (docs/DESIGN.md §5): the embedder is a shared, CPU-bound
resource on the turn's path, so no tenant may take all of it and a down one must not cost
every turn its timeout.

- Query embeddings pass a bounded gate: at most `query_capacity` in flight in this process,
  at most `query_per_tenant` of them one tenant's. A call that finds no room is refused at
  once, and recall goes lexical (`embedder_busy`), instead of queueing behind the others.
- A call counts as in flight until its work really ends. A timeout stops the wait, not the
  work (the local model computes in a thread), so a timed-out call keeps its slot until the
  thread is done: load cannot pile up behind the timeouts.
- A circuit breaker opens after `breaker_failures` failures or timeouts in a row: for
  `breaker_open_s` every call, query or passage, is refused without touching the embedder
  (`embedder_unavailable`, as if it had failed); then one call probes, and a success closes it.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from app import metrics
from app.core.ports import Embedder, EmbedderUnavailable
from app.core.rerank import GENERIC_QUESTIONS
from app.settings import EmbedderSettings

T = TypeVar("T")

EMBEDDER_UNAVAILABLE = "embedder_unavailable"
EMBEDDER_BUSY = "embedder_busy"


def retrieve_late_failure(task: asyncio.Future[Any]) -> None:
    """A call that fails after its caller stopped waiting is not an unhandled error."""
    if not task.cancelled():
        task.exception()


@dataclass
class CircuitBreaker:
    failures_to_open: int
    open_for_s: float
    clock: Callable[[], float] = time.monotonic
    failures: int = 0
    opened_at: float | None = None

    def allows(self) -> bool:
        """Closed, or open long enough that one call may probe."""
        return self.opened_at is None or self.clock() - self.opened_at >= self.open_for_s

    def succeeded(self) -> None:
        self.failures, self.opened_at = 0, None

    def failed(self) -> None:
        self.failures += 1
        if self.failures >= self.failures_to_open:
            self.opened_at = self.clock()


@dataclass
class EmbedderGate:
    query_capacity: int
    query_per_tenant: int
    breaker: CircuitBreaker
    in_flight: Counter[str] = field(default_factory=Counter)

    @classmethod
    def from_settings(cls, settings: EmbedderSettings) -> EmbedderGate:
        breaker = CircuitBreaker(settings.breaker_failures, settings.breaker_open_s)
        return cls(settings.query_capacity, settings.query_per_tenant, breaker)

    def _refusal(self, tenant: str) -> str | None:
        if not self.breaker.allows():
            return EMBEDDER_UNAVAILABLE
        full = sum(self.in_flight.values()) >= self.query_capacity
        if full or self.in_flight[tenant] >= self.query_per_tenant:
            return EMBEDDER_BUSY
        return None

    async def query(
        self, tenant: str, work: Callable[[], Awaitable[T]], timeout_s: float
    ) -> tuple[T | None, str | None]:
        """The query's vector, or None with the reason recall went lexical."""
        refused = self._refusal(tenant)
        if refused is not None:
            metrics.EMBEDDER_REFUSED.labels(reason=refused).inc()
            return None, refused
        self.in_flight[tenant] += 1

        def release(_: asyncio.Future[T]) -> None:
            self.in_flight[tenant] -= 1

        return await self._guarded(work, timeout_s, on_done=release)

    async def passages(
        self, work: Callable[[], Awaitable[T]], timeout_s: float
    ) -> tuple[T | None, str | None]:
        """Passage vectors behind the breaker only (offloads are bounded by the turns)."""
        if not self.breaker.allows():
            metrics.EMBEDDER_REFUSED.labels(reason=EMBEDDER_UNAVAILABLE).inc()
            return None, EMBEDDER_UNAVAILABLE
        return await self._guarded(work, timeout_s)

    async def _guarded(
        self,
        work: Callable[[], Awaitable[T]],
        timeout_s: float,
        *,
        on_done: Callable[[asyncio.Future[T]], None] | None = None,
    ) -> tuple[T | None, str | None]:
        task: asyncio.Future[T] = asyncio.ensure_future(work())
        task.add_done_callback(retrieve_late_failure)
        if on_done is not None:
            task.add_done_callback(on_done)
        try:
            value = await asyncio.wait_for(asyncio.shield(task), timeout_s)
        except (EmbedderUnavailable, TimeoutError):
            self.breaker.failed()
            return None, EMBEDDER_UNAVAILABLE
        self.breaker.succeeded()
        return value, None


class QuestionCentroid:
    """The centroid of the embedder's vectors for questions with no subject of their own
    (`core.rerank.GENERIC_QUESTIONS`), computed once per process on first use; None while
    the embedder cannot give it (recall then ranks by the plain query)."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._vector: list[float] | None = None
        self._lock = asyncio.Lock()

    async def vector(self, timeout_s: float) -> list[float] | None:
        async with self._lock:
            if self._vector is None:
                try:
                    vectors = await asyncio.wait_for(self._embed_all(), timeout_s)
                except (EmbedderUnavailable, TimeoutError):
                    return None
                self._vector = [sum(values) / len(vectors) for values in zip(*vectors, strict=True)]
            return self._vector

    async def _embed_all(self) -> list[list[float]]:
        return [await self._embedder.embed_query(q) for q in GENERIC_QUESTIONS]


QueryAnswer = tuple[list[float] | None, str | None]  # the vector, or the reason there is none


class QueryVectorCache:
    """Query vectors by a hash of the embedder's model and the text, the `size` most recently
    used kept. A text being embedded is one shared call: whoever asks meanwhile (the turn that
    started it early, its recall, a retry) awaits the same result. A refusal or failure is not
    kept, so the next ask tries the embedder again."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[str, asyncio.Future[QueryAnswer]] = OrderedDict()

    @staticmethod
    def key(model: str, text: str) -> str:
        return hashlib.sha256(f"{model}\0{text}".encode()).hexdigest()

    async def get(self, key: str, embed: Callable[[], Awaitable[QueryAnswer]]) -> QueryAnswer:
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            metrics.QUERY_CACHE.labels(outcome="hit").inc()
            return await asyncio.shield(found)
        metrics.QUERY_CACHE.labels(outcome="miss").inc()
        call = asyncio.ensure_future(embed())
        if self._size > 0:
            self._entries[key] = call
            call.add_done_callback(lambda done: self._drop_failed(key, done))
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        # Shielded: a caller that stops waiting (a cancelled early start) leaves the call to
        # finish for the others, and into the cache.
        return await asyncio.shield(call)

    def _drop_failed(self, key: str, done: asyncio.Future[QueryAnswer]) -> None:
        failed = done.cancelled() or done.exception() is not None or done.result()[0] is None
        if failed and self._entries.get(key) is done:
            del self._entries[key]
