"""The flat hybrid baseline: what plain retrieval finds on the same messages, no service.

Every posted message in order, cut into chunks of `CHUNK_MESSAGES` consecutive messages (a
named speaker's message as "name: text"); each question ranks the chunks by BM25 (bm25s,
over the store's own lexical terms: words, English stems, CJK bigrams) and by the
embedder's cosine, and the two rankings are fused by reciprocal rank (k = `RRF_K`). No
window, no archive, no time or speaker filter, no floor: every chunk is a candidate, so a
recall figure that falls below this one lost what the simplest hybrid finds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import bm25s

from app.core.lexical import lexical_terms
from app.core.ports import Embedder
from app.core.vectors import cosine

CHUNK_MESSAGES = 4
RRF_K = 60


def chunked(messages: Sequence[str], size: int = CHUNK_MESSAGES) -> list[str]:
    return ["\n".join(messages[i : i + size]) for i in range(0, len(messages), size)]


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    """Items best first by Σ 1 / (k + rank) over the rankings (rank from 1); ties keep the
    order in which items were first seen."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda item: -scores[item])


@dataclass(frozen=True)
class FlatIndex:
    chunks: list[str]
    lexical: bm25s.BM25
    vectors: list[list[float]]

    @classmethod
    async def build(cls, embedder: Embedder, messages: Sequence[str]) -> FlatIndex:
        chunks = chunked(messages)
        lexical = bm25s.BM25()
        lexical.index([lexical_terms(chunk) for chunk in chunks], show_progress=False)
        return cls(chunks, lexical, await embedder.embed_passages(chunks))

    async def ranked(self, embedder: Embedder, question: str) -> list[str]:
        """Every chunk's text, best first. Chunks no query term reaches are left out of the
        lexical ranking (their BM25 is 0), so they count through the dense one alone."""
        positions = range(len(self.chunks))
        terms = lexical_terms(question)
        bm25 = self.lexical.get_scores(terms) if terms else [0.0] * len(self.chunks)
        by_words = sorted((i for i in positions if bm25[i] > 0), key=lambda i: -bm25[i])
        query = await embedder.embed_query(question)
        by_meaning = sorted(positions, key=lambda i: -cosine(query, self.vectors[i]))
        return [self.chunks[i] for i in rrf([by_words, by_meaning])]
