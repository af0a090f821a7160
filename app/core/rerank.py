"""Ranking recalled chunks and packing them into the prompt (DESIGN §4).

Policy:
- Two candidate lists, vector (cosine) and lexical (share of the query's terms present), are
  fused by reciprocal rank: score = Σ 1 / (rrf_k + rank). Each query entity found verbatim in a
  chunk adds `entity_bonus`; a small recency prior adds up to `recency_weight` for the newest.
- An external reranker, when configured, reorders by its own scores; when it fails the fusion
  order stands and the caller flags it.
- A hit must be evidence, not merely the nearest chunk: in `auto` mode without a reference
  word, cosine at least the auto threshold or an entity of the query found verbatim; when
  recall is asked for (a reference word, `force`, the endpoint), a lower cosine threshold or
  any query term found is enough. So an unrelated archive yields no hit and, for a reference
  question, the explicit no-match line.
- Packing: best first, at most k items and B tokens; one item at most `per_chunk_tokens`
  (cut with a marker naming the chunk); chunks wholly inside the window and repeated ids are
  skipped; the block lists the items in time order, each headed `[ts | turn a-b | chunk_id]`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from app.core.lexical import distinct_terms
from app.core.rewrite import RewrittenQuery

MIN_ITEM_TEXT_TOKENS = 20

NO_MATCH_LINE = (
    "No matching earlier context was found for this question in the archived conversation. "
    "Do not guess details from earlier turns; say they are not available or ask the user."
)


@dataclass(frozen=True)
class Candidate:
    chunk_id: str
    turn_start: int
    turn_end: int
    seq_start: int
    seq_end: int
    first_ts: datetime
    raw_text: str
    tokens: int
    vector_score: float | None = None
    lexical_score: float | None = None


@dataclass(frozen=True)
class ScoredHit:
    candidate: Candidate
    score: float
    entity_matches: int


@dataclass(frozen=True)
class Injected:
    hit: ScoredHit
    text: str
    tokens: int
    truncated: bool


def lexical_score(query_terms: Collection[str], text: str) -> float:
    """Share of the query's terms that occur in the text (0 when the query has none)."""
    if not query_terms:
        return 0.0
    present = set(distinct_terms(text))
    return sum(term in present for term in query_terms) / len(query_terms)


def _ranks(
    candidates: Sequence[Candidate], key: Callable[[Candidate], float | None]
) -> dict[str, int]:
    scored = [(key(c), c.chunk_id) for c in candidates if (key(c) or 0) > 0]
    scored.sort(key=lambda pair: -(pair[0] or 0))
    return {chunk_id: rank for rank, (_, chunk_id) in enumerate(scored, start=1)}


def entity_matches(entities: Sequence[str], text: str) -> int:
    lowered = text.lower()
    return sum(entity.lower() in lowered for entity in entities)


def fuse(
    candidates: Sequence[Candidate],
    query: RewrittenQuery,
    *,
    rrf_k: int,
    entity_bonus: float,
    recency_weight: float,
) -> list[ScoredHit]:
    """Candidates by fused score, best first; each chunk once."""
    unique = list({c.chunk_id: c for c in candidates}.values())
    vector = _ranks(unique, lambda c: c.vector_score)
    lexical = _ranks(unique, lambda c: c.lexical_score)
    newest = max((c.turn_end for c in unique), default=1) or 1
    hits = []
    for candidate in unique:
        score = sum(
            1 / (rrf_k + ranks[candidate.chunk_id])
            for ranks in (vector, lexical)
            if candidate.chunk_id in ranks
        )
        matches = entity_matches(query.entities, candidate.raw_text)
        score += entity_bonus * matches + recency_weight * candidate.turn_end / newest
        hits.append(ScoredHit(candidate, score, matches))
    hits.sort(key=lambda hit: (-hit.score, hit.candidate.chunk_id))
    return hits


def reorder(hits: Sequence[ScoredHit], scores: Sequence[float]) -> list[ScoredHit]:
    """The hits in an external reranker's order, carrying its scores."""
    rescored = [replace(hit, score=score) for hit, score in zip(hits, scores, strict=True)]
    return sorted(rescored, key=lambda hit: -hit.score)


def is_evidence(hit: ScoredHit, *, min_similarity: float, lexical_counts: bool) -> bool:
    """Whether a hit is related to the query at all: close enough in vector space, an entity
    of the query found verbatim, or (when `lexical_counts`) any of the query's terms."""
    candidate = hit.candidate
    similar = (candidate.vector_score or 0) >= min_similarity
    lexical = lexical_counts and (candidate.lexical_score or 0) > 0
    return similar or lexical or hit.entity_matches > 0


def truncate_to_tokens(text: str, max_tokens: int, count: Callable[[str], int]) -> tuple[str, bool]:
    """The longest prefix (cut by characters) within `max_tokens`, and whether it was cut."""
    tokens = count(text)
    if tokens <= max_tokens:
        return text, False
    cut = max(1, len(text) * max_tokens // tokens)
    while cut > 1 and count(text[:cut]) > max_tokens:
        cut = cut * 9 // 10
    return text[:cut], True


def _in_window(candidate: Candidate, window_seqs: Collection[int]) -> bool:
    return all(seq in window_seqs for seq in range(candidate.seq_start, candidate.seq_end + 1))


def _cut_marker(chunk_id: str) -> str:
    return f"\n[… cut here; the whole chunk: recall or GET chunk {chunk_id}]"


def _fit(candidate: Candidate, room: int, count: Callable[[str], int]) -> Injected | None:
    """The item (header, text, cut marker) within `room` tokens, or None when it cannot fit."""
    header = item_header(candidate)
    overhead = count(header) + count(_cut_marker(candidate.chunk_id)) + 2
    if room - overhead < MIN_ITEM_TEXT_TOKENS:
        return None
    text, truncated = truncate_to_tokens(candidate.raw_text, room - overhead, count)
    if truncated:
        text += _cut_marker(candidate.chunk_id)
    return Injected(ScoredHit(candidate, 0.0, 0), text, count(f"{header}\n{text}"), truncated)


def pack(
    hits: Sequence[ScoredHit],
    *,
    top_k: int,
    budget_tokens: int,
    per_chunk_tokens: int,
    window_seqs: Collection[int],
    count: Callable[[str], int],
) -> list[Injected]:
    """Best hits within k items and B tokens (headers and markers included), in time order."""
    chosen: list[Injected] = []
    used = 0
    for hit in hits:
        candidate = hit.candidate
        if len(chosen) >= top_k:
            break
        if any(c.hit.candidate.chunk_id == candidate.chunk_id for c in chosen):
            continue
        if _in_window(candidate, window_seqs):
            continue
        item = _fit(candidate, min(per_chunk_tokens, budget_tokens - used), count)
        if item is None:
            break
        chosen.append(replace(item, hit=hit))
        used += item.tokens
    return sorted(chosen, key=lambda item: item.hit.candidate.turn_start)


def item_header(candidate: Candidate) -> str:
    ts = candidate.first_ts.isoformat(timespec="seconds")
    return f"[{ts} | turn {candidate.turn_start}-{candidate.turn_end} | {candidate.chunk_id}]"


def format_block(items: Sequence[Injected]) -> str:
    return "\n\n".join(f"{item_header(item.hit.candidate)}\n{item.text}" for item in items)
