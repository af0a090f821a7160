"""Turning a plan's offload units into chunks with vectors (docs/DESIGN.md §3).

Each unit is embedded once: neighbouring units' vectors decide the topic boundaries and a
chunk's vector is the mean of its units'. With the embedder down the chunks are still built
(token bounds only) and written without vectors, marked for re-embedding.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.chunker import build_chunks, unit_text
from app.core.plan import TurnPlan
from app.services.context import ServiceContext
from app.services.embedding import EMBEDDER_UNAVAILABLE
from app.services.policies import topic_policy
from app.services.recall import FreshChunk


@dataclass(frozen=True)
class OffloadBatch:
    oversize: list[FreshChunk]
    offload: list[FreshChunk]
    fallback: str | None

    @property
    def chunks(self) -> list[FreshChunk]:
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


async def build_batch(ctx: ServiceContext, plan: TurnPlan) -> OffloadBatch:
    units = plan.offload_units
    texts = [d.raw_text for d in plan.oversize_drafts] + [unit_text(u) for u in units]
    vectors = await embed_passages(ctx, texts)
    split = len(plan.oversize_drafts)
    oversize = [
        FreshChunk(draft, vectors[i] if vectors is not None else None)
        for i, draft in enumerate(plan.oversize_drafts)
    ]
    built = build_chunks(
        units,
        ctx.counter,
        topic_policy(ctx.settings),
        new_id=ctx.new_id,
        vectors=vectors[split:] if vectors is not None else None,
    )
    return OffloadBatch(
        oversize=oversize,
        offload=[FreshChunk(draft, vector) for draft, vector in built],
        fallback=None if vectors is not None else EMBEDDER_UNAVAILABLE,
    )
