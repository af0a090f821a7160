"""Recall (docs/DESIGN.md §4–5): rewrite → embed → vector ∪ lexical candidates → fuse / rerank →
pack within k and B. One retrieval path serves the turn, the recall endpoint and the tool.

Degradation: the embedder down or slow → lexical candidates only, flagged
`embedder_unavailable`; no room at the embedder (app/services/embedding.py) → lexical at
once, flagged `embedder_busy`; the reranker failing → fusion order, flagged
`reranker_failed`. None of them ever fails the turn.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field, replace

from app.core import rerank
from app.core.errors import OverLimit
from app.core.ports import RerankerUnavailable
from app.core.rerank import Candidate, Injected, ScoredHit, truncate_to_tokens
from app.core.results import RecalledChunk, RecalledText, RecallResult
from app.core.rewrite import RewrittenQuery, rewrite
from app.core.types import ChunkDraft, tenant_of
from app.core.vectors import cosine
from app.services.context import ServiceContext
from app.services.policies import item_shape
from app.services.sessions import owned_session
from app.settings import Settings
from app.store import events as event_store
from app.store import recall as recall_store
from app.store import sessions as session_store
from app.store.database import Database
from app.store.models import ChunkRow

RERANKER_FAILED = "reranker_failed"


@dataclass(frozen=True)
class FreshChunk:
    """A chunk written by this very turn: searchable before its transaction commits."""

    draft: ChunkDraft
    vector: list[float] | None


@dataclass(frozen=True)
class Retrieval:
    items: list[Injected]
    considered: list[ScoredHit]
    fallback: str | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    already_in_context: tuple[str, ...] = ()  # excluded hits, best first

    def recalled(self) -> tuple[RecalledChunk, ...]:
        return tuple(_recalled(item) for item in self.items)

    def recalled_texts(self) -> tuple[RecalledText, ...]:
        return tuple(RecalledText(**asdict(_recalled(item)), text=item.text) for item in self.items)


def _recalled(item: Injected) -> RecalledChunk:
    candidate = item.hit.candidate
    return RecalledChunk(
        chunk_id=candidate.chunk_id,
        score=round(item.hit.score, 6),
        vector_score=_round(candidate.vector_score),
        lexical_score=_round(candidate.lexical_score),
        turn_range=(candidate.turn_start, candidate.turn_end),
        ts=candidate.first_ts,
        tokens=item.tokens,
        truncated=item.truncated,
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _from_row(row: ChunkRow, vector_score: float | None) -> Candidate:
    return Candidate(
        chunk_id=row.id,
        turn_start=row.turn_start,
        turn_end=row.turn_end,
        seq_start=row.seq_start,
        seq_end=row.seq_end,
        first_ts=row.first_ts,
        raw_text=row.raw_text,
        tokens=row.tokens,
        vector_score=vector_score,
    )


def _from_fresh(fresh: FreshChunk, qvec: list[float] | None) -> Candidate:
    draft = fresh.draft
    similar = cosine(qvec, fresh.vector) if qvec is not None and fresh.vector else None
    return Candidate(
        chunk_id=draft.id,
        turn_start=draft.turn_start,
        turn_end=draft.turn_end,
        seq_start=min(draft.seqs),
        seq_end=max(draft.seqs),
        first_ts=draft.first_ts,
        raw_text=draft.raw_text,
        tokens=draft.tokens,
        vector_score=similar,
    )


async def embed_query(
    ctx: ServiceContext, tenant_id: str, text: str
) -> tuple[list[float] | None, str | None]:
    """The query vector, cut to the query token cap first; or None with the reason recall
    goes lexical (the embedder down, slow, or busy with other calls)."""
    settings = ctx.settings.recall
    text, _ = truncate_to_tokens(text, settings.query_embed_tokens, ctx.counter.count)
    return await ctx.embedder_gate.query(
        tenant_id, lambda: ctx.embedder.embed_query(text), settings.embed_timeout_s
    )


async def search_archive(
    database: Database,
    session_key: str,
    *,
    model: str,
    qvec: list[float] | None,
    terms: Sequence[str],
    limit: int,
    ef_search: int,
) -> tuple[list[tuple[ChunkRow, float]], list[ChunkRow]]:
    """Vector and lexical candidates. On a pool they run at once on two connections (the
    stage takes the slower of the two, not their sum); a database bound to one connection
    (the tests') runs them one after the other."""

    async def by_vector() -> list[tuple[ChunkRow, float]]:
        if qvec is None:
            return []
        async with database.transaction() as db:
            return await recall_store.vector_candidates(
                db, session_key, model, qvec, limit, ef_search
            )

    async def by_terms() -> list[ChunkRow]:
        async with database.transaction() as db:
            return await recall_store.lexical_candidates(db, session_key, terms, limit)

    if database.single_connection:
        return await by_vector(), await by_terms()
    return await asyncio.gather(by_vector(), by_terms())


async def _candidates(
    ctx: ServiceContext, session_key: str, query: RewrittenQuery, qvec: list[float] | None
) -> list[Candidate]:
    settings = ctx.settings.recall
    vector_rows, lexical_rows = await search_archive(
        ctx.database,
        session_key,
        model=ctx.embedder.model_name,
        qvec=qvec,
        terms=query.terms,
        limit=settings.candidates,
        ef_search=settings.hnsw_ef_search,
    )
    found: dict[str, Candidate] = {row.id: _from_row(row, score) for row, score in vector_rows}
    for row in lexical_rows:
        found.setdefault(row.id, _from_row(row, None))
    return list(found.values())


async def _rerank(
    ctx: ServiceContext, query: RewrittenQuery, hits: list[ScoredHit]
) -> tuple[list[ScoredHit], str | None]:
    if ctx.reranker is None or not hits:
        return hits, None
    settings = ctx.settings.reranker
    documents = [hit.candidate.raw_text[: settings.max_chars] for hit in hits]
    try:
        scores = await asyncio.wait_for(
            ctx.reranker.rerank(query.text, documents), timeout=settings.timeout_s
        )
        return rerank.reorder(hits, scores), None
    except (RerankerUnavailable, TimeoutError, ValueError):
        return hits, RERANKER_FAILED


async def retrieve(
    ctx: ServiceContext,
    session_key: str,
    query: RewrittenQuery,
    *,
    top_k: int,
    budget_tokens: int,
    gated: bool,
    window_seqs: Collection[int] = (),
    fresh: Sequence[FreshChunk] = (),
    exclude_ids: Collection[str] = (),
) -> Retrieval:
    """The packed items for `query`. `gated`: auto mode without a reference word, where a hit
    needs the higher similarity threshold or an entity match (see `core.rerank`).
    `exclude_ids`: chunks the caller already has in its context; they are reported in
    `already_in_context` when they match, never returned twice."""
    settings = ctx.settings.recall
    timings: dict[str, float] = {}
    mark = time.perf_counter()
    qvec, embed_fallback = await embed_query(ctx, tenant_of(session_key), query.text)
    timings["embed"] = _ms_since(mark)
    mark = time.perf_counter()
    candidates = await _candidates(ctx, session_key, query, qvec)
    candidates += [_from_fresh(f, qvec) for f in fresh]
    shares = rerank.lexical_scores(query.terms, [c.raw_text for c in candidates])
    candidates = [replace(c, lexical_score=v) for c, v in zip(candidates, shares, strict=True)]
    timings["search"] = _ms_since(mark)
    mark = time.perf_counter()
    hits = rerank.fuse(
        candidates,
        query,
        rrf_k=settings.rrf_k,
        entity_bonus=settings.entity_bonus,
        term_bonus=settings.term_bonus,
        recency_weight=settings.recency_weight,
    )
    similarity = settings.auto_min_similarity if gated else settings.force_min_similarity
    share = settings.auto_min_share if gated else settings.force_min_share
    hits = [h for h in hits if rerank.is_evidence(h, min_similarity=similarity, min_share=share)]
    excluded = [h.candidate.chunk_id for h in hits if h.candidate.chunk_id in exclude_ids]
    hits = [h for h in hits if h.candidate.chunk_id not in exclude_ids]
    hits, rerank_fallback = await _rerank(ctx, query, hits)
    items = rerank.pack(
        hits,
        top_k=top_k,
        budget_tokens=budget_tokens,
        per_chunk_tokens=settings.per_chunk_tokens,
        window_seqs=window_seqs,
        count=ctx.counter.count,
        shape=item_shape(ctx.settings),
        focus=focus_terms(query),
    )
    timings["rerank"] = _ms_since(mark)
    fallback = embed_fallback or rerank_fallback
    return Retrieval(
        items=items,
        considered=hits,
        fallback=fallback,
        timings_ms=timings,
        already_in_context=tuple(excluded),
    )


def focus_terms(query: RewrittenQuery) -> list[str]:
    """What an excerpt centres on: the query's entities, then its content terms."""
    return [term.lower() for term in (*query.entities, *query.terms)]


def _ms_since(mark: float) -> float:
    return round((time.perf_counter() - mark) * 1000, 3)


def check_recall_limits(settings: Settings, top_k: int | None, budget_tokens: int | None) -> None:
    limits = settings.limits
    for name, value, limit in (
        ("top_k", top_k, limits.max_top_k),
        ("budget_tokens", budget_tokens, limits.max_recall_budget_tokens),
    ):
        if value is not None and value > limit:
            raise OverLimit(f"{name} is at most {limit}", field=name, limit=limit, got=value)


async def recall_query(
    ctx: ServiceContext,
    tenant_id: str,
    session_id: str,
    text: str,
    top_k: int | None,
    *,
    budget_tokens: int | None = None,
    skip_injected: bool = False,
) -> RecallResult:
    """An explicit search, never gated, within k and B. `skip_injected` (the memory tool):
    chunks the session's latest turn already put in the prompt are not returned again."""
    check_recall_limits(ctx.settings, top_k, budget_tokens)
    async with ctx.database.transaction() as db:
        row = await owned_session(db, tenant_id, session_id)
        in_window = await session_store.window_seqs(db, row.id)
        injected = (
            await event_store.injected_chunk_ids(db, row.id, row.turn_count)
            if skip_injected
            else []
        )
    query = rewrite(text)
    settings = ctx.settings.recall
    found = await retrieve(
        ctx,
        row.id,
        query,
        top_k=top_k or settings.top_k,
        budget_tokens=budget_tokens or settings.budget_tokens,
        gated=False,
        window_seqs=in_window,
        exclude_ids=injected,
    )
    results = found.recalled_texts()
    return RecallResult(
        query=text,
        query_rewritten=query.text,
        results=results,
        message=_recall_message(results, found.already_in_context),
        already_in_context=found.already_in_context,
        fallback=found.fallback,
        timings_ms=found.timings_ms,
    )


def _recall_message(results: Sequence[RecalledText], already: Sequence[str]) -> str | None:
    if results:
        return None
    if already:
        return "no match beyond what is already in your context: " + ", ".join(already)
    return "no match"
