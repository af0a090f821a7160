"""Ranking recalled chunks and packing them into the prompt (docs/DESIGN.md §4).

Policy:
- Two candidate lists, vector (cosine) and lexical (share of the query's terms present), are
  fused by reciprocal rank: score = Σ 1 / (rrf_k + rank). Exact matches add to it: each query
  entity found verbatim `entity_bonus`, the IDF-weighted share of the query's terms present
  times `term_bonus`; a small recency prior adds up to `recency_weight` for the newest.
- An external reranker, when configured, reorders by its own scores; when it fails the fusion
  order stands and the caller flags it.
- A hit must be evidence, not merely the nearest chunk: cosine at a threshold, an entity of
  the query found verbatim, or a share of the query's (IDF-weighted) terms present. In `auto`
  mode without a reference word the thresholds are higher than when recall is asked for (a
  reference word, `force`, the endpoint). So an unrelated archive yields no hit and, for a
  reference question, the explicit no-match line.
- Packing: best first, at most k items and B tokens; one item at most `per_chunk_tokens`,
  cut to the sentences around the best match of the query, with a marker naming the chunk;
  chunks wholly inside the window and repeated ids are skipped; the block lists the items in
  time order, each headed `[ts | turn a-b | chunk_id]`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from app.core.lexical import distinct_terms
from app.core.rewrite import RewrittenQuery

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


def lexical_scores(query_terms: Collection[str], texts: Sequence[str]) -> list[float]:
    """For each text, the IDF-weighted share of the query's terms it holds (0 to 1).

    Document frequencies are counted over `texts` (the candidate set), so a term found in
    many candidates ("时候", "book") weighs little and a rare one ("发布会", "NorthLine") a lot.
    """
    if not query_terms or not texts:
        return [0.0] * len(texts)
    present = [set(distinct_terms(text)) for text in texts]
    weight = {
        term: math.log(1 + len(texts) / (1 + sum(term in terms for terms in present)))
        for term in query_terms
    }
    total = sum(weight.values())
    return [sum(weight[t] for t in query_terms if t in terms) / total for terms in present]


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
    term_bonus: float,
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
        score += entity_bonus * matches + term_bonus * (candidate.lexical_score or 0)
        score += recency_weight * candidate.turn_end / newest
        hits.append(ScoredHit(candidate, score, matches))
    hits.sort(key=lambda hit: (-hit.score, hit.candidate.chunk_id))
    return hits


def reorder(hits: Sequence[ScoredHit], scores: Sequence[float]) -> list[ScoredHit]:
    """The hits in an external reranker's order, carrying its scores."""
    rescored = [replace(hit, score=score) for hit, score in zip(hits, scores, strict=True)]
    return sorted(rescored, key=lambda hit: -hit.score)


def is_evidence(hit: ScoredHit, *, min_similarity: float, min_share: float) -> bool:
    """Whether a hit is related to the query at all: close enough in vector space, an entity
    of the query found verbatim, or at least `min_share` of the query's (IDF-weighted) terms."""
    candidate = hit.candidate
    similar = (candidate.vector_score or 0) >= min_similarity
    lexical = (candidate.lexical_score or 0) >= min_share > 0 or (
        min_share == 0 and (candidate.lexical_score or 0) > 0
    )
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


_SEGMENT_END = re.compile(r"(?<=[.!?。！？;；\n])")


def _focus_score(segment: str, focus: Sequence[str]) -> int:
    lowered = segment.lower()
    return sum(term in lowered for term in focus)


def excerpt(
    text: str, max_tokens: int, count: Callable[[str], int], focus: Sequence[str] = ()
) -> tuple[str, bool]:
    """At most `max_tokens` of `text`, whole sentences around the one that holds the most
    `focus` terms (the head when none does), with `[…]` where text was left out."""
    if count(text) <= max_tokens:
        return text, False
    segments = [s for s in _SEGMENT_END.split(text) if s]
    scores = [_focus_score(s, focus) for s in segments]
    best = max(range(len(segments)), key=lambda i: (scores[i], -i))
    sizes = [count(s) for s in segments]
    if sizes[best] > max_tokens:
        cut, _ = truncate_to_tokens(segments[best], max_tokens, count)
        return cut, True
    lo = hi = best
    used = sizes[best]
    grew = True
    while grew:
        grew = False
        for nxt in (hi + 1, lo - 1):
            if 0 <= nxt < len(segments) and used + sizes[nxt] <= max_tokens:
                used += sizes[nxt]
                lo, hi = min(lo, nxt), max(hi, nxt)
                grew = True
    body = "".join(segments[lo : hi + 1]).strip()
    return f"{'[…] ' if lo > 0 else ''}{body}{' […]' if hi < len(segments) - 1 else ''}", True


def _in_window(candidate: Candidate, window_seqs: Collection[int]) -> bool:
    return all(seq in window_seqs for seq in range(candidate.seq_start, candidate.seq_end + 1))


def _cut_marker(chunk_id: str) -> str:
    return f"\n[… cut here; the whole chunk: recall or GET chunk {chunk_id}]"


@dataclass(frozen=True)
class ItemShape:
    """What an item needs beyond its text, in tokens."""

    min_text_tokens: int  # an item with less room than this for its text is not packed
    margin_tokens: int  # slack for the line breaks joining header, text and cut marker


def _fit(
    candidate: Candidate,
    room: int,
    count: Callable[[str], int],
    focus: Sequence[str],
    shape: ItemShape,
) -> Injected | None:
    """The item (header, text, cut marker) within `room` tokens, or None when it cannot fit.
    A cut keeps the sentences around the best match of the query (`focus`)."""
    header = item_header(candidate)
    overhead = count(header) + count(_cut_marker(candidate.chunk_id)) + shape.margin_tokens
    if room - overhead < shape.min_text_tokens:
        return None
    text, truncated = excerpt(candidate.raw_text, room - overhead, count, focus)
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
    shape: ItemShape,
    focus: Sequence[str] = (),
) -> list[Injected]:
    """Best hits within k items and B tokens (headers and markers included), in time order;
    an item cut to fit keeps the sentences that best match `focus` (the query's terms)."""
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
        item = _fit(candidate, min(per_chunk_tokens, budget_tokens - used), count, focus, shape)
        if item is None:
            break
        chosen.append(replace(item, hit=hit))
        used += item.tokens
    return sorted(chosen, key=lambda item: item.hit.candidate.turn_start)


def item_header(candidate: Candidate) -> str:
    ts = candidate.first_ts.isoformat(timespec="seconds")
    return header(ts, candidate.turn_start, candidate.turn_end, candidate.chunk_id)


def header(ts: str, turn_start: int, turn_end: int, chunk_id: str) -> str:
    """`[ts | turn a-b | chunk_id]`: where a recalled item came from."""
    return f"[{ts} | turn {turn_start}-{turn_end} | {chunk_id}]"


def format_block(items: Sequence[Injected]) -> str:
    return "\n\n".join(f"{item_header(item.hit.candidate)}\n{item.text}" for item in items)
