"""Deterministic fakes for the ports, for tests: no mocks of the code under test."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from app.core.messages import Media
from app.core.ports import ChatModelUnavailable, EmbedderUnavailable, RerankerUnavailable
from app.core.tokens import media_tokens
from app.providers.embedders import HashEmbedder


class CountingEmbedder(HashEmbedder):
    """A hash embedder that counts its calls, so tests can prove work was or was not done."""

    def __init__(self, dimension: int = 384) -> None:
        super().__init__(dimension)
        self.passage_calls = 0
        self.query_calls = 0

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.passage_calls += 1
        return await super().embed_passages(texts)

    async def embed_query(self, text: str) -> list[float]:
        self.query_calls += 1
        return await super().embed_query(text)


class DownEmbedder(HashEmbedder):
    """An embedder whose service is down."""

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        raise EmbedderUnavailable("embedder is down (fake)")

    async def embed_query(self, text: str) -> list[float]:
        raise EmbedderUnavailable("embedder is down (fake)")


class WhitespaceCounter:
    """Counts whitespace-separated words: predictable numbers for unit tests."""

    encoding_name = "whitespace"

    def count(self, text: str) -> int:
        return len(text.split())

    def count_media(self, media: Media) -> int:
        return media_tokens(media)


class SlowEmbedder(HashEmbedder):
    """A stalled service: every call answers only after `delay_s`."""

    def __init__(self, delay_s: float, dimension: int = 384) -> None:
        super().__init__(dimension)
        self.delay_s = delay_s

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        await asyncio.sleep(self.delay_s)
        return await super().embed_passages(texts)

    async def embed_query(self, text: str) -> list[float]:
        await asyncio.sleep(self.delay_s)
        return await super().embed_query(text)


class FailingReranker:
    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        raise RerankerUnavailable("reranker is down (fake)")


class ScriptedReranker:
    """Scores a document by whether it contains `preferred`: a predictable cross-encoder."""

    def __init__(self, preferred: str) -> None:
        self.preferred = preferred
        self.calls = 0

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        self.calls += 1
        return [1.0 if self.preferred in doc else 0.0 for doc in documents]


class EchoChatModel:
    """A faithful chat model: returns the draft notes it was given, tidied."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, system: str, user: str) -> str:
        self.calls += 1
        return user.strip()


class WeakeningChatModel:
    """A chat model that softens constraints, as summarisers do: "only" → "preferably",
    "只" → "优先"."""

    async def complete(self, system: str, user: str) -> str:
        return (
            user.replace("Only", "Preferably").replace("only", "preferably").replace("只", "优先")
        )


class BrokenChatModel:
    """A chat model whose adapter has a bug (not an outage): the notes update must not fail
    the turn."""

    async def complete(self, system: str, user: str) -> str:
        raise RuntimeError("unexpected failure inside the notes update (fake)")


class HeldEmbedder(HashEmbedder):
    """Every call waits until the test releases it: calls in flight that the test controls.
    Counts the calls that reached it."""

    def __init__(self, dimension: int = 384) -> None:
        super().__init__(dimension)
        self.released = asyncio.Event()
        self.calls = 0

    async def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        await self.released.wait()
        return await super().embed_query(text)


class ScriptedChatModel:
    """A chat model answering `reply(system, user)` after `delay_s`; a None reply means the
    model is down. It keeps every prompt it was given."""

    def __init__(self, reply: Callable[[str, str], str | None], delay_s: float = 0.0) -> None:
        self.reply = reply
        self.delay_s = delay_s
        self.prompts: list[tuple[str, str]] = []

    async def complete(self, system: str, user: str) -> str:
        self.prompts.append((system, user))
        await asyncio.sleep(self.delay_s)
        answer = self.reply(system, user)
        if answer is None:
            raise ChatModelUnavailable("chat model is down (fake)")
        return answer
