"""An embedder that remembers: the real local model, each distinct text embedded once per
test process. The hard set's tests post the same fixed conversations more than once (the
local path, then the scripted LLM's); the second pays only for what it has not seen."""

from __future__ import annotations

import time
from collections.abc import Sequence

from app.core.ports import Embedder


class MemoEmbedder:
    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self.dimension = inner.dimension
        self.model_name = inner.model_name
        self._passages: dict[str, list[float]] = {}
        self._queries: dict[str, list[float]] = {}
        self.seconds = 0.0  # spent in the inner embedder
        self.hits = self.misses = 0

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._passages))
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            started = time.perf_counter()
            vectors = await self._inner.embed_passages(missing)
            self.seconds += time.perf_counter() - started
            self._passages.update(zip(missing, vectors, strict=True))
        return [self._passages[t] for t in texts]

    async def embed_query(self, text: str) -> list[float]:
        if text not in self._queries:
            started = time.perf_counter()
            self._queries[text] = await self._inner.embed_query(text)
            self.seconds += time.perf_counter() - started
            self.misses += 1
        else:
            self.hits += 1
        return self._queries[text]
