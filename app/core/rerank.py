"""Ranking recalled chunks and packing them into the prompt (docs/DESIGN.md §4).

Policy:
- A chunk's vector score is its best unit's inner product with the shifted query (the query
  minus the centroid of subject-less questions), plus a share of its mean vector's; a unit said
  on the day the question names, or by a participant it names, is lifted (`UnitFocus`).
- Fusion stays in those units: the IDF-weighted share of the query's terms present times
  `term_bonus`, each query entity found verbatim `entity_bonus`, a recency tie-break. A chunk
  only the lexical channel found starts from the weakest vector candidate's score.
- An external reranker, when configured, reorders by its own scores; when it fails the fusion
  order stands and the caller flags it.
- A hit must be evidence, not merely the nearest chunk (`evidence`): its margin over the
  query's median candidate (lifts aside), or a share of the query's terms, at the floors of
  the caller (a turn, or recall asked for). A day the question names is a hint, not a wall:
  its chunks are lifted, and answer alone when any was said then; when none was (nothing
  said that day, or history imported without times) the rest answer. So an unrelated
  archive yields no hit and, for a reference question, the explicit no-match line.
- Packing: best first, at most k items and B tokens; one item at most `per_chunk_tokens`,
  cut to the sentences around the best match of the query, with a marker naming the chunk;
  chunks wholly inside the window and repeated ids are skipped; the block lists the items in
  time order, each headed `[ts | turn a-b | chunk_id]`.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from app.core.confidence import ConfidenceWeights, HitFeatures, confidence
from app.core.dates import Period
from app.core.lexical import sentences, term_set
from app.core.pace import pace
from app.core.rewrite import RewrittenQuery

NO_MATCH_LINE = (
    "No matching earlier context was found for this question in the archived conversation. "
    "Do not guess details from earlier turns; say they are not available or ask the user."
)


# Questions with no subject of their own. Every question's embedding shares their direction, so
# short, question-like units sit near any question; recall subtracts their centroid from the
# query vector (`shifted_query`), which ranks units by what the question asks about instead.
GENERIC_QUESTIONS = (
    "What did I say about that?",
    "Tell me more about it.",
    "What happened?",
    "Can you remind me what we talked about?",
    "What was it again?",
    "Who said that?",
    "When was that?",
    "How much was it?",
    "我说了什么？",
    "那件事怎么样了？",
    "发生了什么？",
    "我们之前聊过什么？",
    "那是什么来着？",
    "谁说的？",
    "什么时候的事？",
    "多少钱来着？",
)


def shifted_query(
    query: Sequence[float], centroid: Sequence[float] | None, weight: float
) -> list[float]:
    """`query − weight × centroid` (the query itself without a centroid)."""
    if centroid is None or weight == 0:
        return list(query)
    return [q - weight * c for q, c in zip(query, centroid, strict=True)]


@dataclass(frozen=True)
class UnitFocus:
    """What lifts a unit above its vector score: being said on the day the question names,
    or by a participant it names (`name` of the message, matched as a whole word)."""

    question: str
    period: Period | None
    period_bonus: float
    speaker_bonus: float

    def bonus(self, said_at: datetime, speaker: str | None) -> float:
        lift = 0.0
        if self.period is not None and self.period.holds(said_at):
            lift += self.period_bonus
        if speaker and names_speaker(self.question, speaker):
            lift += self.speaker_bonus
        return lift


def names_speaker(question: str, speaker: str) -> bool:
    """Whether the question names the speaker: as a word in Latin script ("Tom", not
    "tomorrow"), as a substring in CJK ("小林说")."""
    if not speaker.isascii():
        return speaker in question
    return re.search(rf"(?<![\w]){re.escape(speaker)}(?![\w])", question, re.IGNORECASE) is not None


@dataclass(frozen=True)
class Candidate:
    """A chunk that may answer the query. `vector_score` ranks: its best unit's inner
    product with the shifted query, plus a share of its mean vector's; `similarity` is that
    best unit's plain cosine with the query."""

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
    similarity: float | None = None
    lift: float = 0.0  # what `UnitFocus` added to its best unit (ranks, is not evidence)
    last_ts: datetime | None = None

    def said_within(self, period: Period) -> bool:
        """Whether any of the chunk was said within `period`."""
        return self.first_ts < period.end and (self.last_ts or self.first_ts) >= period.start


@dataclass(frozen=True)
class ScoredHit:
    candidate: Candidate
    score: float
    entity_matches: int
    margin: float = 0.0  # what the chunk says scores above the query's median candidate
    lead: float = 0.0  # … and above the next candidate's
    rank: int = 0  # 1-based, in the fused order (0: not ranked yet)
    confidence: float = 0.0  # how likely it holds what the query asks (`core.confidence`)


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
    present = [term_set(text) for text in texts]
    weight = {}
    for term in query_terms:
        pace()  # each term is a pass over every candidate
        weight[term] = math.log(1 + len(texts) / (1 + sum(term in terms for terms in present)))
    total = sum(weight.values())
    shares = []
    for terms in present:
        pace()
        shares.append(sum(weight[t] for t in query_terms if t in terms) / total)
    return shares


def scored_by_terms(
    candidates: Sequence[Candidate], query_terms: Collection[str]
) -> list[Candidate]:
    """The candidates, each with its `lexical_scores` share of the query's terms."""
    shares = lexical_scores(query_terms, [c.raw_text for c in candidates])
    scored = []
    for candidate, share in zip(candidates, shares, strict=True):
        pace()
        scored.append(replace(candidate, lexical_score=share))
    return scored


def entity_matches(entities: Sequence[str], text: str) -> int:
    lowered = text.lower()
    return sum(entity.lower() in lowered for entity in entities)


@dataclass(frozen=True)
class FusionWeights:
    """What exact matches add to a chunk's vector score (in the vector score's own units)."""

    term: float  # × the IDF-weighted share of the query's terms present
    entity: float  # per query entity found verbatim
    recency: float  # × turn_end / newest turn: a tie-breaker


def fuse(
    candidates: Sequence[Candidate],
    query: RewrittenQuery,
    weights: FusionWeights,
    calibration: ConfidenceWeights,
) -> list[ScoredHit]:
    """Candidates by fused score, best first; each chunk once, with its margin over the
    median candidate and its calibrated confidence. A chunk only the lexical channel found
    starts from the weakest vector candidate's score (0 with no vectors), so exact matches
    can lift it, but words alone never outrank what the question means."""
    unique = list({c.chunk_id: c for c in candidates}.values())
    floor = min((c.vector_score for c in unique if c.vector_score is not None), default=0.0)
    newest = max((c.turn_end for c in unique), default=1) or 1
    content: dict[str, float] = {}
    hits = []
    for candidate in unique:
        pace()
        matches = entity_matches(query.entities, candidate.raw_text)
        score = floor if candidate.vector_score is None else candidate.vector_score
        score += weights.term * (candidate.lexical_score or 0) + weights.entity * matches
        score += weights.recency * candidate.turn_end / newest
        content[candidate.chunk_id] = score
        hits.append(ScoredHit(candidate, score + candidate.lift, matches))
    hits.sort(key=lambda hit: (-hit.score, hit.candidate.chunk_id))
    median = statistics.median(content.values()) if hits else 0.0
    said = [content[h.candidate.chunk_id] for h in hits]
    return [
        _calibrated(hit, rank, said[rank - 1] - median, _lead(said, rank), calibration)
        for rank, hit in enumerate(hits, start=1)
    ]


def _lead(said: Sequence[float], rank: int) -> float:
    """What the hit at `rank` says scores above the next one's (0 for the last)."""
    return said[rank - 1] - said[rank] if rank < len(said) else 0.0


def _calibrated(
    hit: ScoredHit, rank: int, margin: float, lead: float, calibration: ConfidenceWeights
) -> ScoredHit:
    pace()
    features = HitFeatures(margin, lead, hit.candidate.similarity, rank)
    return replace(
        hit, margin=margin, lead=lead, rank=rank, confidence=confidence(calibration, features)
    )


def reorder(hits: Sequence[ScoredHit], scores: Sequence[float]) -> list[ScoredHit]:
    """The hits in an external reranker's order, carrying its scores; hits beyond the scores
    (the reranker saw the best N only) follow in their own order."""
    rescored = [replace(hit, score=score) for hit, score in zip(hits, scores, strict=False)]
    return sorted(rescored, key=lambda hit: -hit.score) + list(hits[len(scores) :])


def judged(hits: Sequence[ScoredHit], scores: Sequence[float], floor: float) -> list[ScoredHit]:
    """The hits a judging reranker scored at least `floor`, in its order; the hits it did not
    see are not evidence."""
    return [hit for hit in reorder(hits[: len(scores)], scores) if hit.score >= floor]


def said_on_the_day(hits: Sequence[ScoredHit], period: Period | None) -> list[ScoredHit] | None:
    """The hits said on the day the question names. None when it names none, or when none of
    the candidates was said then (nothing said that day, or history imported without times):
    a named day is a hint, not a wall, and the rest answer by the usual floors."""
    if period is None:
        return None
    that_day = [h for h in hits if h.candidate.said_within(period)]
    return that_day or None


@dataclass(frozen=True)
class EvidenceRules:
    min_margin: float
    min_share: float
    min_confidence: float = 0.0  # with vectors, a hit below this is no evidence by its scores
    words_only: bool = False  # no vector scores at all
    entities: bool = False  # an entity of the query found verbatim is evidence on its own
    period: Period | None = None  # the day the question names
    period_min_margin: float | None = None  # the floor of hits said that day (None: min_margin)

    def within_the_day(self) -> EvidenceRules:
        """The rules for the hits said on the named day. The day identifies them, so their
        words may match less: their own margin floor, and no confidence floor (it was fitted
        on margins against the whole history, not within one day)."""
        margin = self.min_margin if self.period_min_margin is None else self.period_min_margin
        return replace(self, min_margin=margin, min_confidence=0.0)


def evidence(hits: Sequence[ScoredHit], rules: EvidenceRules, *, gated: bool) -> list[ScoredHit]:
    """The hits that count as evidence: a lead of what a chunk says over the query's median
    candidate (`margin`; the day and speaker lifts rank but are no evidence), or at least
    `min_share` of the query's IDF-weighted terms. Margins, not similarities, because an
    embedder's similarities are compressed and shift from query to query. `words_only` (no
    vectors: the embedder down, busy, or of another model than the archive's): the terms, or
    an entity of the query verbatim; `entities`: such an entity counts with vectors too (recall
    asked for by name: "Zorblax"). A question that names a day is answered from the hits said
    that day (`within_the_day`) when there are any, from the rest otherwise
    (`said_on_the_day`). Ungated (asked for, a reference word, `force`) the best hits are
    returned whenever one is evidence, nothing otherwise; gated (automatic) only the hits that
    are evidence themselves. A margin holds only with a calibrated confidence of
    `min_confidence` or more (a topic never discussed still has a nearest chunk, and one that
    leads the median)."""
    that_day = said_on_the_day(hits, rules.period)
    if that_day is not None:
        hits, rules = that_day, rules.within_the_day()

    def holds(hit: ScoredHit) -> bool:
        pace()
        worded = (hit.candidate.lexical_score or 0) >= rules.min_share > 0
        named = (rules.entities or rules.words_only) and hit.entity_matches > 0
        if rules.words_only:
            return worded or named
        scored = hit.margin >= rules.min_margin and hit.confidence >= rules.min_confidence
        return worded or named or scored

    if not any(holds(h) for h in hits):
        return []
    return [h for h in hits if holds(h)] if gated else list(hits)


def truncate_to_tokens(text: str, max_tokens: int, count: Callable[[str], int]) -> tuple[str, bool]:
    """The longest prefix (cut by characters) within `max_tokens`, and whether it was cut."""
    tokens = count(text)
    if tokens <= max_tokens:
        return text, False
    cut = max(1, len(text) * max_tokens // tokens)
    while cut > 1 and count(text[:cut]) > max_tokens:
        cut = cut * 9 // 10
    return text[:cut], True


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
    segments = sentences(text)
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


def in_window(candidate: Candidate, window_seqs: Collection[int]) -> bool:
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
        if in_window(candidate, window_seqs):
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
