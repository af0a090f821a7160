"""Turning a plan's offload units into chunks (docs/DESIGN.md §3–4).

`queued` (the default): the chunks are built with token bounds only and written without
vectors; the embedding worker embeds them after the turn (app/services/embedding_queue.py),
and recall finds them by their words until then. `inline`: each message is embedded here,
unit by unit (the whole message, or windows of sentences of a long one): a chunk keeps its
units' vectors for recall and their mean, and a budget unit's mean (an assistant call with
its tool results) decides the topic boundaries. With the embedder down an inline offload
still builds its chunks (token bounds only) and queues them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.core.chunker import build_chunks, message_unit_texts
from app.core.plan import TurnPlan
from app.core.types import ChunkDraft, EmbeddedChunk, WindowMessage
from app.core.vectors import mean_vector
from app.services.context import ServiceContext
from app.services.embedding import EMBEDDER_UNAVAILABLE
from app.services.policies import topic_policy, unit_policy


@dataclass(frozen=True)
class OffloadBatch:
    oversize: list[EmbeddedChunk]
    offload: list[EmbeddedChunk]
    fallback: str | None

    @property
    def queued(self) -> bool:
        """Chunks written without vectors: the embedding worker has work."""
        return any(chunk.vector is None for chunk in self.chunks)

    @property
    def chunks(self) -> list[EmbeddedChunk]:
        return [*self.oversize, *self.offload]

    def chunk_of(self) -> dict[int, str]:
        """Each offloaded message's own chunk: the first that holds it (overlap copies aside)."""
        owner: dict[int, str] = {}
        for fresh in self.offload:
            for seq in fresh.draft.seqs:
                owner.setdefault(seq, fresh.draft.id)
        return owner


async def embed_passages(ctx: ServiceContext, texts: list[str]) -> list[list[float]] | None:
    """Passage vectors, or None when the embedder is down or slow (chunks are then written
    without vectors and re-embedded later)."""
    if not texts:
        return []
    settings = ctx.settings.embedder
    cut = [text[: settings.max_chars] for text in texts]
    vectors, _ = await ctx.embedder_gate.passages(
        lambda: ctx.embedder.embed_passages(cut), settings.passage_timeout_s
    )
    return vectors


def _with_vectors(draft: ChunkDraft, by_text: dict[str, list[float]] | None) -> EmbeddedChunk:
    if by_text is None or not draft.units:
        return EmbeddedChunk(draft, None)
    unit_vectors = tuple(by_text[text] for text in draft.unit_texts())
    return EmbeddedChunk(draft, mean_vector(unit_vectors), unit_vectors)


def _unit_means(
    units: Sequence[Sequence[WindowMessage]],
    texts_of: dict[int, list[str]],
    by_text: dict[str, list[float]],
    dimension: int,
) -> list[list[float]]:
    """A budget unit's vector for topic chunking: the mean of its messages' unit vectors."""
    means = []
    for unit in units:
        vectors = [by_text[text] for item in unit for text in texts_of[item.seq]]
        # No text at all (an empty message): a zero vector, whose cosine with anything is 0.
        means.append(mean_vector(vectors) if vectors else [0.0] * dimension)
    return means


async def build_batch(ctx: ServiceContext, plan: TurnPlan) -> OffloadBatch:
    if ctx.settings.embedder.offload_embedding == "queued":
        return await ctx.throttle.run(queued_batch, ctx, plan)
    return await _embedded_batch(ctx, plan)


def queued_batch(ctx: ServiceContext, plan: TurnPlan) -> OffloadBatch:
    """The chunks with no vectors (for the queue): nothing here waits for the embedder."""
    built = build_chunks(
        plan.offload_units, ctx.counter, topic_policy(ctx.settings), new_id=ctx.new_id
    )
    return OffloadBatch(
        oversize=[EmbeddedChunk(draft, None) for draft in plan.oversize_drafts],
        offload=[EmbeddedChunk(draft, None) for draft, _ in built],
        fallback=None,
    )


async def _embedded_batch(ctx: ServiceContext, plan: TurnPlan) -> OffloadBatch:
    units = plan.offload_units
    count = ctx.counter.count
    texts_of = {
        item.seq: message_unit_texts(item, unit_policy(ctx.settings), count)
        for unit in units
        for item in unit
    }
    texts = [t for d in plan.oversize_drafts for t in d.unit_texts()]
    texts += [t for unit_texts in texts_of.values() for t in unit_texts]
    unique = list(dict.fromkeys(texts))
    vectors = await embed_passages(ctx, unique)
    by_text = dict(zip(unique, vectors, strict=True)) if vectors is not None else None
    built = await ctx.throttle.run(
        build_chunks,
        units,
        ctx.counter,
        topic_policy(ctx.settings),
        new_id=ctx.new_id,
        vectors=_unit_means(units, texts_of, by_text, ctx.embedder.dimension) if by_text else None,
    )
    return OffloadBatch(
        oversize=[_with_vectors(draft, by_text) for draft in plan.oversize_drafts],
        offload=[_with_vectors(draft, by_text) for draft, _ in built],
        fallback=None if vectors is not None else EMBEDDER_UNAVAILABLE,
    )
