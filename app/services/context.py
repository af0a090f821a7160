"""What the use cases are given: the database, the ports, the settings, a clock."""

from __future__ import annotations

import asyncio
import copy
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime

from app.core.ports import (
    ChatModel,
    Embedder,
    ModelUpstream,
    QueryRewriter,
    Reranker,
    TokenCounter,
)
from app.services.embedding import EmbedderGate, QueryVectorCache, QuestionCentroid
from app.services.shared_calls import CallsInFlight
from app.services.throttle import Throttle
from app.settings import Settings
from app.store.database import Database


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_chunk_id() -> str:
    return f"ck_{uuid.uuid4().hex[:20]}"


class ArchiveHint:
    """Sessions this process has seen with chunks, the most recent `size` kept: a turn of one
    starts embedding its query before it reads the session (a wrong hint costs one query
    embedding; the read corrects it)."""

    def __init__(self, size: int = 10_000) -> None:
        self._size = size
        self._keys: OrderedDict[str, None] = OrderedDict()

    def add(self, key: str) -> None:
        self._keys[key] = None
        self._keys.move_to_end(key)
        while len(self._keys) > self._size:
            self._keys.popitem(last=False)

    def discard(self, key: str) -> None:
        self._keys.pop(key, None)

    def __contains__(self, key: str) -> bool:
        return key in self._keys


class TurnsInFlight:
    """The turns this process is working on. The in-process embedding worker waits for a
    moment with none before each batch (`wait_quiet`), so its embedding does not take the
    cores from their query embeddings and searches."""

    def __init__(self) -> None:
        self.count = 0
        self._quiet = asyncio.Event()
        self._quiet.set()

    @contextmanager
    def track(self) -> Iterator[None]:
        self.count += 1
        self._quiet.clear()
        try:
            yield
        finally:
            self.count -= 1
            if self.count == 0:
                self._quiet.set()

    async def wait_quiet(self, timeout_s: float) -> bool:
        """Until no turn is in flight, at most `timeout_s`; whether it is quiet now."""
        if self.count and timeout_s > 0:
            with suppress(TimeoutError):
                await asyncio.wait_for(self._quiet.wait(), timeout_s)
        return self.count == 0


class SessionLocks:
    """One asyncio lock per session id, so turns of one session queue up in this process
    instead of racing to the version check; locks vanish when no turn holds them."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def for_session(self, session_id: str) -> asyncio.Lock:
        lock = self._locks.get(session_id)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[session_id] = lock
        return lock


@dataclass
class ServiceContext:
    database: Database
    counter: TokenCounter  # for text of no known model; `for_model` gives the model's own
    embedder: Embedder
    settings: Settings
    reranker: Reranker | None = None
    chat_model: ChatModel | None = None
    query_rewriter: QueryRewriter | None = None
    upstream: ModelUpstream | None = None  # the proxy's provider API (None: no proxy calls)
    # The embedding worker's passages, when they run apart from the turns' (None: `embedder`).
    worker_embedder: Embedder | None = None
    locks: SessionLocks = field(default_factory=SessionLocks)
    embedder_gate: EmbedderGate = field(init=False)  # built from the settings
    query_cache: QueryVectorCache = field(init=False)  # sized by the settings
    archive_hint: ArchiveHint = field(default_factory=ArchiveHint)
    # Set by a turn that queued chunks for embedding: this process's worker wakes up.
    embedding_wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    # Sessions a recall found chunks of still queued, in the order they asked: this process's
    # worker takes their chunks ahead of the line (core.fair_queue).
    embedding_asked: dict[str, None] = field(default_factory=dict)
    turns_in_flight: TurnsInFlight = field(default_factory=TurnsInFlight)
    calls_in_flight: CallsInFlight = field(init=False)  # proxy copies (sized by the settings)
    throttle: Throttle = field(init=False)  # each tenant's rates and large calls
    question_centroid: QuestionCentroid = field(init=False)  # of the embedder
    clock: Callable[[], datetime] = utc_now
    new_id: Callable[[], str] = new_chunk_id
    # The counter of a model's family (app/providers/tokenizer.py); None: `counter` for all.
    counters: Callable[[str | None], TokenCounter] | None = None
    query_counter: TokenCounter = field(init=False)  # `counter` as given, never the model's

    def __post_init__(self) -> None:
        self.embedder_gate = EmbedderGate.from_settings(self.settings.embedder)
        self.query_cache = QueryVectorCache(self.settings.recall.query_cache_size)
        self.calls_in_flight = CallsInFlight(self.settings.proxy.shared_wait_s)
        self.throttle = Throttle(self.settings.throttle)
        self.query_counter = self.counter  # caps what is embedded, whatever the model
        self.question_centroid = QuestionCentroid(self.embedder)

    def for_model(self, model: str | None) -> ServiceContext:
        """This context counting tokens as `model`'s tokenizer does. A shallow copy: the
        pool, the gate and the locks are the same objects."""
        if self.counters is None:
            return self
        counted = copy.copy(self)
        counted.counter = self.counters(model)
        return counted

    async def aclose(self) -> None:
        """Closes the database pool and any provider that holds connections."""
        providers = (self.embedder, self.worker_embedder, self.reranker, self.chat_model)
        for provider in (*providers, self.upstream):
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()
        await self.database.dispose()
        self.throttle.close()
