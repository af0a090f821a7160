"""Recall (docs/DESIGN.md §4–5): rewrite → embed → vector ∪ lexical candidates → fuse / rerank →
pack within k and B. One retrieval path serves the turn, the recall endpoint and the tool.

Degradation: the embedder down or slow → lexical candidates only, flagged
`embedder_unavailable`; no room at the embedder (app/services/embedding.py) → lexical at
once, flagged `embedder_busy`; the reranker failing → fusion order, flagged
`reranker_failed`; the query rewriter failing → the rule rewrite alone, flagged
`rewriter_failed`. None of them ever fails the turn (one flag is reported: the embedder's
first, then the reranker's).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime

from app import metrics
from app.core import rerank
from app.core.errors import OverLimit
from app.core.injection import InjectionRules, Need, need_of, tiers
from app.core.lexical import likeliest_rare
from app.core.pace import pace
from app.core.ports import QueryRewriterUnavailable, RerankerUnavailable
from app.core.rerank import (
    Candidate,
    EvidenceRules,
    FusionWeights,
    Injected,
    ScoredHit,
    UnitFocus,
    shifted_query,
)
from app.core.results import RecalledChunk, RecalledText, RecallResult
from app.core.rewrite import RewrittenQuery, embedding_focus, rewrite, with_expansion
from app.core.types import EmbeddedChunk, tenant_of
from app.core.vectors import cosine, dot
from app.services.context import ServiceContext
from app.services.embedding_queue import ask_worker_first, embed_for_recall
from app.services.policies import item_shape
from app.services.sessions import owned_session
from app.settings import RecallSettings, Settings
from app.store import recall as recall_store
from app.store import sessions as session_store
from app.store.database import Database
from app.store.models import ChunkRow
from app.store.recall import UnitHit

RERANKER_FAILED = "reranker_failed"
REWRITER_FAILED = "rewriter_failed"


@dataclass(frozen=True)
class TurnTiering:
    """How a turn chooses what to inject (`core.injection`): its rules, whether recall was
    forced, and the content terms its prompt already holds (window, notes, held blocks)."""

    rules: InjectionRules
    forced: bool
    seen_terms: frozenset[str]


@dataclass(frozen=True)
class Retrieval:
    query: RewrittenQuery  # as searched for (with the rewriter's restatement, if any)
    items: list[Injected]
    considered: list[ScoredHit]  # the evidence, in its final order
    fallback: str | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    already_in_context: tuple[str, ...] = ()  # excluded hits, best first
    pending_chunks: int = 0  # searched by words only: no vectors yet (the embedding queue)
    fused: list[ScoredHit] = field(default_factory=list)  # every candidate, by fused score
    # A turn's (`TurnTiering`): what it asks, its pointers and its near-duplicates.
    need: Need | None = None
    pointers: list[ScoredHit] = field(default_factory=list)
    repeated: list[ScoredHit] = field(default_factory=list)

    def best_first(self) -> list[tuple[int, Injected]]:
        """The packed items best first (the evidence's final order), each with its rank."""
        order = {hit.candidate.chunk_id: index for index, hit in enumerate(self.considered)}
        ranked = sorted(self.items, key=lambda item: order.get(item.hit.candidate.chunk_id, 0))
        return list(enumerate(ranked, start=1))

    def recalled(self) -> tuple[RecalledChunk, ...]:
        """The items in the block's (time) order, each with its rank."""
        rank_of = {item.hit.candidate.chunk_id: rank for rank, item in self.best_first()}
        return tuple(_recalled(item, rank_of[item.hit.candidate.chunk_id]) for item in self.items)

    def pointer_summary(self, hits: Iterable[ScoredHit], after: int) -> list[RecalledChunk]:
        """Pointers as reported, ranked on from `after` (the evidence comes first), with no
        text of theirs in the prompt."""
        return [_pointed(hit, rank) for rank, hit in enumerate(hits, start=after + 1)]

    def recalled_texts(self) -> tuple[RecalledText, ...]:
        """The items best first, each with its rank and text."""
        return tuple(
            RecalledText(**asdict(_recalled(item, rank)), text=item.text)
            for rank, item in self.best_first()
        )


def _recalled(item: Injected, rank: int) -> RecalledChunk:
    candidate = item.hit.candidate
    return RecalledChunk(
        chunk_id=candidate.chunk_id,
        score=round(item.hit.score, 6),
        confidence=round(item.hit.confidence, 4),
        vector_score=_round(candidate.similarity),
        lexical_score=_round(candidate.lexical_score),
        turn_range=(candidate.turn_start, candidate.turn_end),
        ts=candidate.first_ts,
        tokens=item.tokens,
        truncated=item.truncated,
        rank=rank,
        margin=round(item.hit.margin, 6),
        lead=round(item.hit.lead, 6),
    )


def _pointed(hit: ScoredHit, rank: int) -> RecalledChunk:
    candidate = hit.candidate
    return RecalledChunk(
        chunk_id=candidate.chunk_id,
        score=round(hit.score, 6),
        confidence=round(hit.confidence, 4),
        vector_score=_round(candidate.similarity),
        lexical_score=_round(candidate.lexical_score),
        turn_range=(candidate.turn_start, candidate.turn_end),
        ts=candidate.first_ts,
        tokens=0,
        truncated=True,
        rank=rank,
        margin=round(hit.margin, 6),
        lead=round(hit.lead, 6),
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _from_row(
    row: ChunkRow, best: LiftedUnit | None = None, context: float | None = None
) -> Candidate:
    score = None if best is None else best.unit.score + (context or 0.0)
    return Candidate(
        chunk_id=row.id,
        turn_start=row.turn_start,
        turn_end=row.turn_end,
        seq_start=row.seq_start,
        seq_end=row.seq_end,
        first_ts=row.first_ts,
        raw_text=row.raw_text,
        tokens=row.tokens,
        vector_score=score,
        similarity=None if best is None else best.unit.similarity,
        lift=0.0 if best is None else best.lift,
        last_ts=row.last_ts,
    )


def _from_fresh_all(
    fresh: Sequence[EmbeddedChunk],
    vectors: QueryVectors | None,
    context_weight: float,
    focus: UnitFocus,
) -> list[Candidate]:
    return [_from_fresh(chunk, vectors, context_weight, focus) for chunk in fresh]


def _from_fresh(
    fresh: EmbeddedChunk, query: QueryVectors | None, context_weight: float, focus: UnitFocus
) -> Candidate:
    """A chunk of this very turn, scored in memory as the store scores a written one."""
    pace()
    draft = fresh.draft
    score = similarity = None
    lift = 0.0
    if query is not None and fresh.unit_vectors and fresh.vector is not None:
        scored = [
            (dot(vector, query.shifted), focus.bonus(unit.created_at, unit.speaker), vector)
            for unit, vector in zip(draft.units, fresh.unit_vectors, strict=True)
        ]
        best_score, lift, best = max(scored, key=lambda row: row[0] + row[1])
        score = best_score + context_weight * dot(fresh.vector, query.shifted)
        similarity = cosine(best, query.vector)
    return Candidate(
        chunk_id=draft.id,
        turn_start=draft.turn_start,
        turn_end=draft.turn_end,
        seq_start=min(draft.seqs),
        seq_end=max(draft.seqs),
        first_ts=draft.first_ts,
        raw_text=draft.raw_text,
        tokens=draft.tokens,
        vector_score=score,
        similarity=similarity,
        lift=lift,
        last_ts=draft.last_ts,
    )


@dataclass(frozen=True)
class QueryVectors:
    vector: list[float]  # the query as embedded
    shifted: list[float]  # minus the share of generic questions (see `core.rerank`)


async def embed_query(
    ctx: ServiceContext, tenant_id: str, text: str
) -> tuple[list[float] | None, str | None]:
    """The vector of the query's focus within the query token cap (`embedding_focus`), from
    the cache when this process embedded the same text lately; or None with the reason recall
    goes lexical (the embedder down, slow, or busy with other calls)."""
    settings = ctx.settings.recall
    focus = embedding_focus(text, settings.query_embed_tokens, ctx.query_counter.count)
    return await ctx.query_cache.get(
        ctx.query_cache.key(ctx.embedder.model_name, focus),
        lambda: ctx.embedder_gate.query(
            tenant_id, lambda: ctx.embedder.embed_query(focus), settings.embed_timeout_s
        ),
    )


async def query_vectors(
    ctx: ServiceContext, tenant_id: str, text: str
) -> tuple[QueryVectors | None, str | None]:
    vector, fallback = await embed_query(ctx, tenant_id, text)
    if vector is None:
        return None, fallback
    centroid = await ctx.question_centroid.vector(ctx.settings.recall.embed_timeout_s)
    shifted = shifted_query(vector, centroid, ctx.settings.recall.question_shift)
    return QueryVectors(vector, shifted), None


@dataclass(frozen=True)
class ArchiveHits:
    by_vector: list[tuple[ChunkRow, LiftedUnit, float | None]]  # chunk, best unit, context
    by_terms: list[ChunkRow]
    pending: int = 0  # the session's chunks still waiting for vectors


def vector_scan(settings: RecallSettings) -> recall_store.VectorScan:
    return recall_store.VectorScan(
        ef_search=settings.hnsw_ef_search,
        exact_max_units=settings.exact_max_units,
        max_scan_tuples=settings.hnsw_max_scan_tuples,
    )


def lexical_scan(settings: RecallSettings) -> recall_store.LexicalScan:
    return recall_store.LexicalScan(
        max_rows=settings.lexical_max_rows, k1=settings.bm25_k1, b=settings.bm25_b
    )


async def search_archive(
    database: Database,
    session_key: str,
    *,
    model: str,
    query: QueryVectors | None,
    terms: Sequence[str],
    settings: RecallSettings,
    focus: UnitFocus | None = None,
) -> ArchiveHits:
    """Vector and lexical candidates, R of each. A chunk's vector candidate is its best unit,
    lifted by `focus` (said on the day the question names, by a speaker it names); with a
    day named, that day's units are candidates too. On a pool the two channels run at once
    on two connections (the stage takes the slower of the two, not their sum); a database
    bound to one connection (the tests') runs them one after the other."""
    limit = settings.candidates
    unit_limit = limit * settings.units_per_candidate

    async def by_vector() -> tuple[list[tuple[ChunkRow, LiftedUnit, float | None]], int]:
        """The vector channel's candidates, and the chunks it cannot see yet (queued)."""
        async with database.transaction() as db:
            shape = await recall_store.archive_shape(db, session_key, settings.exact_max_units)
            if query is None:
                return [], shape.pending_chunks
            units = await recall_store.unit_candidates(
                db,
                session_key,
                model,
                query.vector,
                query.shifted,
                unit_limit,
                vector_scan(settings),
                shape,
            )
            if focus is not None and focus.period is not None:
                units += await recall_store.units_said_in(
                    db, session_key, model, query.vector, query.shifted, unit_limit, focus.period
                )
            best = _best_unit_per_chunk(units, focus)
            chosen = list(best)[:limit]
            rows = await recall_store.chunks_with_context(db, session_key, chosen, query.shifted)
        weight = settings.context_weight
        lifted = [
            (row, best[row.id], None if context is None else weight * context)
            for row, context in rows
        ]
        return lifted, shape.pending_chunks

    async def by_terms() -> list[ChunkRow]:
        async with database.transaction() as db:
            searched = likeliest_rare(terms, settings.lexical_max_terms)
            return await recall_store.lexical_candidates(
                db, session_key, searched, limit, lexical_scan(settings)
            )

    if database.single_connection:
        vector_rows, pending = await by_vector()
        lexical_rows = await by_terms()
    else:
        (vector_rows, pending), lexical_rows = await asyncio.gather(by_vector(), by_terms())
    return ArchiveHits(vector_rows, lexical_rows, pending)


@dataclass(frozen=True)
class LiftedUnit:
    unit: UnitHit
    lift: float  # from `UnitFocus`: ranks the unit, is no evidence


def _best_unit_per_chunk(
    units: Sequence[UnitHit], focus: UnitFocus | None
) -> dict[str, LiftedUnit]:
    """Chunk id → its best unit (ranked with the lift `focus` gives), best chunks first."""
    lifted = [LiftedUnit(u, focus.bonus(u.said_at, u.speaker) if focus else 0.0) for u in units]
    best: dict[str, LiftedUnit] = {}
    for item in sorted(lifted, key=lambda i: (-(i.unit.score + i.lift), i.unit.chunk_id)):
        best.setdefault(item.unit.chunk_id, item)
    return best


def unit_focus(settings: RecallSettings, query: RewrittenQuery) -> UnitFocus:
    return UnitFocus(query.raw, query.period, settings.period_bonus, settings.speaker_bonus)


async def _candidates(
    ctx: ServiceContext, session_key: str, query: RewrittenQuery, vectors: QueryVectors | None
) -> tuple[list[Candidate], int]:
    """The archive's candidates, and how many of its chunks wait for vectors."""
    settings = ctx.settings.recall
    hits = await search_archive(
        ctx.database,
        session_key,
        model=ctx.embedder.model_name,
        query=vectors,
        terms=query.terms,
        settings=settings,
        focus=unit_focus(settings, query),
    )
    found = {row.id: _from_row(row, unit, context) for row, unit, context in hits.by_vector}
    for row in hits.by_terms:
        found.setdefault(row.id, _from_row(row))
    return list(found.values()), hits.pending


async def _reranker_scores(
    ctx: ServiceContext, query: RewrittenQuery, hits: Sequence[ScoredHit]
) -> list[float] | None:
    """The reranker's scores of the best `top_n` hits; None when it failed or is too slow."""
    assert ctx.reranker is not None
    settings = ctx.settings.reranker
    documents = [hit.candidate.raw_text[: settings.max_chars] for hit in hits[: settings.top_n]]
    try:
        scores = await asyncio.wait_for(
            ctx.reranker.rerank(query.question, documents), timeout=settings.timeout_s
        )
    except (RerankerUnavailable, TimeoutError):
        return None
    return scores if len(scores) == len(documents) else None


async def _ranked_evidence(
    ctx: ServiceContext,
    query: RewrittenQuery,
    hits: list[ScoredHit],
    rules: EvidenceRules,
    *,
    gated: bool,
) -> tuple[list[ScoredHit], str | None]:
    """The evidence in its final order, and the fallback flag if the reranker failed. With a
    judging reranker (`reranker.judge_floor`) its scores decide what is evidence and the local
    floors step in only when it fails; otherwise the floors decide and it reorders."""
    floor = ctx.settings.reranker.judge_floor
    if ctx.reranker is not None and floor is not None:
        candidates = rerank.said_on_the_day(hits, rules.period) or hits
        scores = await _reranker_scores(ctx, query, candidates) if candidates else []
        if scores is not None:
            return rerank.judged(candidates, scores, floor), None
        return rerank.evidence(hits, rules, gated=gated), RERANKER_FAILED
    return await _reordered(ctx, query, rerank.evidence(hits, rules, gated=gated))


async def _reordered(
    ctx: ServiceContext, query: RewrittenQuery, hits: list[ScoredHit]
) -> tuple[list[ScoredHit], str | None]:
    """The evidence in an ordering reranker's order, when one is configured."""
    if ctx.reranker is None or not hits:
        return hits, None
    scores = await _reranker_scores(ctx, query, hits)
    if scores is None:
        return hits, RERANKER_FAILED
    return rerank.reorder(hits, scores), None


async def expanded(
    ctx: ServiceContext, query: RewrittenQuery, recent: Sequence[str]
) -> tuple[RewrittenQuery, str | None]:
    """`query` with the query rewriter's restatement when one is configured; unchanged, with
    the fallback flag, when it fails or is slower than `llm.rewrite_timeout_s`."""
    if ctx.query_rewriter is None:
        return query, None
    try:
        expansion = await asyncio.wait_for(
            ctx.query_rewriter.rewrite(query.question, recent),
            timeout=ctx.settings.llm.rewrite_timeout_s,
        )
    except (QueryRewriterUnavailable, TimeoutError):
        return query, REWRITER_FAILED
    return with_expansion(query, expansion), None


def evidence_rules(
    settings: RecallSettings, query: RewrittenQuery, hits: Sequence[ScoredHit], *, asked: bool
) -> EvidenceRules:
    """The floors of the caller: a turn's (`auto_*`), or recall asked for (`asked_*`, where a
    named day has a floor of its own and a verbatim entity counts)."""
    return EvidenceRules(
        min_margin=settings.asked_min_margin if asked else settings.auto_min_margin,
        min_share=settings.asked_min_share if asked else settings.auto_min_share,
        min_confidence=settings.asked_min_confidence if asked else 0.0,
        period_min_margin=settings.asked_period_min_margin if asked else None,
        words_only=all(h.candidate.vector_score is None for h in hits),
        entities=asked,
        period=query.period,
    )


@dataclass(frozen=True)
class Screened:
    """The fused hits against what the caller already has (`exclude_ids`): what it has is
    reported when it would have been evidence, and the rest is judged without it, since a
    chunk in the context never vouches for the ones around it."""

    excluded: list[str]  # the evidence the caller has, by id
    new: list[ScoredHit]  # every hit the caller has not
    new_held: list[ScoredHit]  # the evidence among those


def _screened(
    hits: Sequence[ScoredHit], rules: EvidenceRules, exclude_ids: Collection[str]
) -> Screened:
    held = rerank.evidence(hits, rules, gated=True)
    excluded = [h.candidate.chunk_id for h in held if h.candidate.chunk_id in exclude_ids]
    return Screened(
        excluded,
        [h for h in hits if h.candidate.chunk_id not in exclude_ids],
        [h for h in held if h.candidate.chunk_id not in exclude_ids],
    )


async def retrieve(
    ctx: ServiceContext,
    session_key: str,
    query: RewrittenQuery,
    *,
    top_k: int,
    budget_tokens: int,
    gated: bool,
    asked: bool = False,
    window_seqs: Collection[int] = (),
    fresh: Sequence[EmbeddedChunk] = (),
    exclude_ids: Collection[str] = (),
    recent: Sequence[str] = (),
    tiering: TurnTiering | None = None,
) -> Retrieval:
    """The packed items for `query`. `asked`: recall asked for outside a turn (the endpoint,
    the tool), judged by the lenient floors, which embeds some of the session's queued chunks
    itself first (`embed_for_recall`; a turn does not wait for them: the worker takes them
    next, `ask_worker_first`); a turn is judged by the automatic ones, and
    `gated` (no reference word, not `force`) keeps only the hits that hold on their own
    (see `core.rerank.evidence`). `tiering` (a turn): evidence and pointers by calibrated
    confidence and what the turn asks, near-duplicates of its prompt left out
    (`core.injection`); without vectors, or with a judging reranker, the floors above. With
    an embedder the confidence was not fitted on, a hit must also hold by those floors: its
    margins are on another scale, so its confidence orders but cannot vouch.
    `exclude_ids`: chunks the caller already has in its context; they are reported in
    `already_in_context` when they match, never returned twice. `recent`: the last turns'
    texts, for the query rewriter."""
    settings = ctx.settings.recall
    timings: dict[str, float] = {}
    mark = time.perf_counter()
    query, rewrite_fallback = await expanded(ctx, query, recent)
    if ctx.query_rewriter is not None:
        timings["rewrite"] = _ms_since(mark)
    mark = time.perf_counter()
    vectors, embed_fallback = await query_vectors(ctx, tenant_of(session_key), query.text)
    timings["embed"] = _ms_since(mark)
    mark = time.perf_counter()
    if vectors is not None and asked:  # the session's queued chunks, searched by meaning too
        mark = time.perf_counter()
        if await embed_for_recall(ctx, session_key):
            timings["embed_queued"] = _ms_since(mark)
        mark = time.perf_counter()
    candidates, pending = await _candidates(ctx, session_key, query, vectors)
    if pending:
        ask_worker_first(ctx, session_key)
    pending += sum(1 for chunk in fresh if chunk.unit_vectors is None)
    metrics.RECALL_PENDING.inc(pending)
    focus = unit_focus(settings, query)
    candidates += await ctx.throttle.run(
        _from_fresh_all, fresh, vectors, settings.context_weight, focus
    )
    candidates = await ctx.throttle.run(rerank.scored_by_terms, candidates, query.terms)
    timings["search"] = _ms_since(mark)
    mark = time.perf_counter()
    hits = await ctx.throttle.run(
        rerank.fuse,
        candidates,
        query,
        FusionWeights(settings.term_bonus, settings.entity_bonus, settings.recency_weight),
        settings.confidence.weights_for(ctx.embedder.model_name),
    )
    rules = evidence_rules(settings, query, hits, asked=asked)
    screened = await ctx.throttle.run(_screened, hits, rules, exclude_ids)
    excluded, fused, hits = screened.excluded, hits, screened.new
    tiered = None
    if tiering is not None and not rules.words_only and ctx.settings.reranker.judge_floor is None:
        need = await ctx.throttle.run(
            need_of, query, hits, forced=tiering.forced, seen_terms=tiering.seen_terms
        )
        vouched = screened.new_held  # holds alone
        if not settings.confidence.fits(ctx.embedder.model_name):
            hits = vouched  # its confidence orders but cannot vouch
        tiered = await ctx.throttle.run(
            tiers,
            hits,
            need,
            tiering.rules,
            tiering.seen_terms,
            focus_terms(query),
            {hit.candidate.chunk_id for hit in vouched},
        )
        hits, rerank_fallback = await _reordered(ctx, query, tiered.evidence)
    else:
        hits, rerank_fallback = await _ranked_evidence(ctx, query, hits, rules, gated=gated)
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
    fallback = embed_fallback or rerank_fallback or rewrite_fallback
    return Retrieval(
        query=query,
        items=items,
        considered=hits,
        fallback=fallback,
        timings_ms=timings,
        already_in_context=tuple(excluded),
        pending_chunks=pending,
        fused=fused,
        need=need if tiered is not None else None,
        pointers=tiered.pointers if tiered is not None else [],
        repeated=tiered.repeated if tiered is not None else [],
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
    asked_at: datetime | None = None,
) -> RecallResult:
    """An explicit search, never gated, within k and B. `skip_injected` (the memory tool):
    chunks a recalled block in the window already quotes are not returned again."""
    check_recall_limits(ctx.settings, top_k, budget_tokens)
    async with ctx.database.transaction() as db:
        row = await owned_session(db, tenant_id, session_id)
        in_window = await session_store.window_seqs(db, row.id)
        injected = await session_store.held_chunk_ids(db, row.id) if skip_injected else []
    ctx = ctx.for_model(row.model or ctx.settings.default_model)  # items counted as sent
    query = rewrite(text, asked_at=asked_at or ctx.clock())
    settings = ctx.settings.recall
    found = await retrieve(
        ctx,
        row.id,
        query,
        top_k=top_k or settings.top_k,
        budget_tokens=budget_tokens or settings.budget_tokens,
        gated=False,
        asked=True,
        window_seqs=in_window,
        exclude_ids=injected,
    )
    results = found.recalled_texts()
    return RecallResult(
        query=text,
        query_rewritten=found.query.text,
        results=results,
        message=_recall_message(results, found.already_in_context),
        already_in_context=found.already_in_context,
        fallback=found.fallback,
        timings_ms=found.timings_ms,
        pending_chunks=found.pending_chunks,
    )


def _recall_message(results: Sequence[RecalledText], already: Sequence[str]) -> str | None:
    if results:
        return None
    if already:
        return "no match beyond what is already in your context: " + ", ".join(already)
    return "no match"
