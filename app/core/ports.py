"""Ports: what the use cases need from the outside world, as Protocols.

Adapters live in `app/providers`; deterministic fakes for tests live in
`app/providers/fakes.py`. Services depend on these Protocols only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from app.core.messages import Media
    from app.core.proxy import UpstreamReply, UpstreamRequest


class TokenCounter(Protocol):
    """Counts tokens of plain text with one tokenizer, and of images, clips and files by its
    provider's rules (`app.core.tokens.media_tokens`)."""

    @property
    def encoding_name(self) -> str: ...

    def count(self, text: str) -> int: ...

    def count_media(self, media: Media) -> int: ...


class EmbedderUnavailable(Exception):
    """The embedder could not answer; callers degrade (chunks stored without a vector)."""


class Embedder(Protocol):
    """Turns text into unit-length vectors of a fixed dimension.

    Passages (stored chunks) and queries may be embedded differently (e5 prefixes), so the
    two calls are separate. Raises `EmbedderUnavailable` when it cannot answer.
    """

    @property
    def model_name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]: ...

    async def embed_query(self, text: str) -> list[float]: ...


class ChatModelUnavailable(Exception):
    """The chat model failed or timed out; callers fall back to rules."""


class ChatModel(Protocol):
    """An OpenAI-compatible chat model: better notes, and optionally recall's rewrite and
    rerank (`app/providers/llm_recall.py`)."""

    async def complete(self, system: str, user: str) -> str: ...


class RerankerUnavailable(Exception):
    """The reranker failed or timed out; callers keep the fusion order and flag it."""


class Reranker(Protocol):
    """Scores documents against a query (higher is better), e.g. a cross-encoder service or
    a chat model judging whether each document answers the question (then 0–1)."""

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]: ...


class QueryRewriterUnavailable(Exception):
    """The rewriter failed or timed out; callers search with the rule rewrite alone."""


class QueryRewriter(Protocol):
    """Restates a question about an earlier conversation as a search query: on its own
    (references resolved from `recent`, the last turns' texts, oldest first) and in the words
    its answer would likely use. Raises `QueryRewriterUnavailable`."""

    async def rewrite(self, question: str, recent: Sequence[str]) -> str: ...


class UpstreamStream(Protocol):
    """An upstream answer being streamed: status and headers now, the body as it comes."""

    status: int
    headers: tuple[tuple[str, str], ...]

    def chunks(self) -> AsyncIterator[bytes]: ...

    async def read(self) -> bytes: ...

    async def aclose(self) -> None: ...


class ModelUpstream(Protocol):
    """The provider API the proxy forwards to (`app/providers/upstream.py`). Raises
    `UpstreamUnavailable` or `UpstreamTimeout` (app/core/errors.py) when there is no answer."""

    async def send(self, request: UpstreamRequest) -> UpstreamReply: ...

    async def open_stream(self, request: UpstreamRequest) -> UpstreamStream: ...


class Progress(Protocol):
    """Where a long job reports its advance (the CLI draws it): `done` more items of `stage`
    are finished; `total`, when known, is the stage's size. A new `stage` starts a new count."""

    def __call__(self, stage: str, done: int, total: int | None = None) -> None: ...


def no_progress(stage: str, done: int, total: int | None = None) -> None:
    """A `Progress` that reports nowhere (the server's own timers, the tests)."""
