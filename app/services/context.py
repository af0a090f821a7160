"""What the use cases are given: the database, the ports, the settings, a clock."""

from __future__ import annotations

import asyncio
import copy
import uuid
import weakref
from collections.abc import Callable
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
from app.services.embedding import EmbedderGate, QuestionCentroid
from app.settings import Settings
from app.store.database import Database


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_chunk_id() -> str:
    return f"ck_{uuid.uuid4().hex[:20]}"


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
    locks: SessionLocks = field(default_factory=SessionLocks)
    embedder_gate: EmbedderGate = field(init=False)  # built from the settings
    question_centroid: QuestionCentroid = field(init=False)  # of the embedder
    clock: Callable[[], datetime] = utc_now
    new_id: Callable[[], str] = new_chunk_id
    # The counter of a model's family (app/providers/tokenizer.py); None: `counter` for all.
    counters: Callable[[str | None], TokenCounter] | None = None

    def __post_init__(self) -> None:
        self.embedder_gate = EmbedderGate.from_settings(self.settings.embedder)
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
        for provider in (self.embedder, self.reranker, self.chat_model, self.upstream):
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()
        await self.database.dispose()
