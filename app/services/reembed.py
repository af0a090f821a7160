"""Re-embedding (`ebbtide reembed`): chunks written while the embedder was down, or embedded
by another model, get a vector of the current model. Vectors are computed outside any
transaction; each batch is written in its own short one."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.ports import EmbedderUnavailable
from app.services.context import ServiceContext
from app.store import chunks as chunk_store

BATCH = 16


@dataclass(frozen=True)
class ReembedReport:
    embedded: int
    stopped_by: str | None


async def reembed(
    ctx: ServiceContext, session_key: str | None = None, batch: int = BATCH
) -> ReembedReport:
    model = ctx.embedder.model_name
    limit = ctx.settings.embedder.max_chars
    embedded = 0
    while True:
        async with ctx.database.transaction() as db:
            todo = await chunk_store.chunks_to_reembed(db, model, session_key, batch)
        if not todo:
            return ReembedReport(embedded, None)
        try:
            vectors = await ctx.embedder.embed_passages([raw[:limit] for _, _, raw in todo])
        except EmbedderUnavailable as error:
            return ReembedReport(embedded, f"embedder unavailable: {error}")
        async with ctx.database.transaction() as db:
            for (owner, chunk_id, _), vector in zip(todo, vectors, strict=True):
                await chunk_store.set_embedding(db, owner, chunk_id, vector, model)
        embedded += len(todo)
