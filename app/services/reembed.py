"""Re-embedding (`ebbtide reembed`): chunks written while the embedder was down, or embedded
by another model, get a vector of the current model. Vectors are computed outside any
transaction; each batch is written in its own short one."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.ports import EmbedderUnavailable
from app.core.types import UnitDraft
from app.services.context import ServiceContext
from app.store import chunks as chunk_store
from app.store.models import ChunkRow

BATCH = 16


@dataclass(frozen=True)
class ReembedReport:
    embedded: int
    stopped_by: str | None


def _whole_text_unit(chunk: ChunkRow) -> UnitDraft:
    """A chunk written before units existed gets one unit over its whole text."""
    return UnitDraft(0, chunk.seq_start, chunk.first_ts, 0, len(chunk.raw_text))


async def reembed(
    ctx: ServiceContext, session_key: str | None = None, batch: int = BATCH
) -> ReembedReport:
    model = ctx.embedder.model_name
    limit = ctx.settings.embedder.max_chars
    embedded = 0
    while True:
        async with ctx.database.transaction() as db:
            todo = await chunk_store.chunks_to_reembed(db, model, session_key, batch)
            stored = await chunk_store.units_of(db, todo)
        if not todo:
            return ReembedReport(embedded, None)
        units = [stored.get((c.session_id, c.id)) or [_whole_text_unit(c)] for c in todo]
        texts = [u.text(c.raw_text)[:limit] for c, us in zip(todo, units, strict=True) for u in us]
        try:
            vectors = await ctx.embedder.embed_passages(texts)
        except EmbedderUnavailable as error:
            return ReembedReport(embedded, f"embedder unavailable: {error}")
        async with ctx.database.transaction() as db:
            at = 0
            for chunk, chunk_units in zip(todo, units, strict=True):
                mine = vectors[at : at + len(chunk_units)]
                at += len(chunk_units)
                await chunk_store.set_embedding(
                    db, chunk.session_id, chunk.id, chunk_units, mine, model
                )
        embedded += len(todo)
