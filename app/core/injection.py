"""What a turn's automatic recall puts in the prompt, of the hits the ranking found
(docs/DESIGN.md §4, "What a turn injects"; docs/RECALL.md).

- *Need.* A turn that asks nothing of the past (no question, no reference to what was said, no
  entity of it found verbatim in a hit) gets evidence only when it is strong
  (`unasked_confidence`); a question asks (`asked_confidence`); a reference to what was said
  ("the code word I told you", "刚才说的那个仓库", "as we agreed") lowers the floor
  (`referenced_confidence`).
- *Novelty.* A hit whose content terms the prompt already holds (the window, the notes, the
  recalled blocks held) is a near-duplicate: it brings nothing and is neither evidence nor a
  pointer.
- *Two tiers.* Evidence is raw text. A question's hits below the evidence floor but at
  `pointer_confidence` or more become one-line pointers (`pointer_line`): chunk id, turns and a
  gist in the chunk's own words, which the model opens with the memory tool if it needs them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum

from app.core.lexical import sentences, term_set
from app.core.rerank import Candidate, ScoredHit, excerpt
from app.core.rewrite import RewrittenQuery


class Need(StrEnum):
    UNASKED = "unasked"  # nothing asked of the past
    ASKED = "asked"  # a question, or an entity of a hit named
    REFERENCED = "referenced"  # a reference to what was said, or recall forced


# A question: its mark, or a question word opening a sentence (people drop the mark).
_QUESTION_EN = re.compile(
    r"(?:^|[.!]\s+)(?:what|when|where|who|whom|whose|which|why|how|did|do|does|is|are|was|were"
    r"|can|could|would|should|have|has)\b",
    re.IGNORECASE,
)
# "几" alone is also "a few" (几个西葫芦), "呢" a softener, and "有没有" / "是否" as often
# an embedded "whether" (检查了辣椒有没有蚜虫): only forms that ask (a mark asks anyway).
_QUESTION_ZH = (
    "什么",
    "哪",
    "谁",
    "几点",
    "几号",
    "几月",
    "几天",
    "几次",
    "多少",
    "怎么",
    "为什么",
    "吗",
)


def asks_question(text: str) -> bool:
    if "?" in text or "？" in text:
        return True
    return _QUESTION_EN.search(text) is not None or any(w in text for w in _QUESTION_ZH)


def need_of(
    query: RewrittenQuery,
    hits: Sequence[ScoredHit],
    *,
    forced: bool,
    seen_terms: Collection[str] = frozenset(),
) -> Need:
    """What the turn asks of the past; `forced`: recall mode `force`. Naming an entity a hit
    holds asks of the past only when the prompt does not name it already ("Saturday" in a
    conversation that mentions it every week asks nothing)."""
    if forced or query.has_reference:
        return Need.REFERENCED
    if asks_question(query.raw):
        return Need.ASKED
    unseen = [e for e in query.entities if not term_set(e) <= set(seen_terms)]
    if unseen and any(hit.entity_matches for hit in hits):
        return Need.ASKED
    return Need.UNASKED


@dataclass(frozen=True)
class InjectionRules:
    unasked_confidence: float
    asked_confidence: float
    referenced_confidence: float
    pointer_confidence: float
    max_pointers: int
    max_seen_overlap: float  # a hit with this share of its content terms in the prompt or more

    def evidence_floor(self, need: Need) -> float:
        return {
            Need.UNASKED: self.unasked_confidence,
            Need.ASKED: self.asked_confidence,
            Need.REFERENCED: self.referenced_confidence,
        }[need]


def seen_share(
    candidate: Candidate, seen_terms: Collection[str], focus: Sequence[str] = ()
) -> float:
    """The share of the content terms the prompt already holds (0: none or no terms) of what
    the chunk says about the query: its sentences naming a `focus` term, the whole chunk when
    none does. A detail said once among small talk is a small part of its chunk; judged on
    the whole chunk, the talk around it would pass it for a repeat."""
    about = [s for s in sentences(candidate.raw_text) if any(t in s.lower() for t in focus)]
    terms = term_set(" ".join(about) if about else candidate.raw_text)
    if not terms:
        return 0.0
    return sum(term in seen_terms for term in terms) / len(terms)


@dataclass(frozen=True)
class Tiers:
    evidence: list[ScoredHit]  # raw text, best first
    pointers: list[ScoredHit]  # one line each, best first
    repeated: list[ScoredHit]  # evidence the prompt already holds, left out


def tiers(
    hits: Sequence[ScoredHit],
    need: Need,
    rules: InjectionRules,
    seen_terms: Collection[str],
    focus: Sequence[str] = (),
    vouched: Collection[str] = (),
) -> Tiers:
    """The hits (best first) split into evidence, pointers and near-duplicates. Pointers only
    where the turn asks; a hit's tier is its calibrated confidence's, except that where the
    turn asks, a hit `vouched` for (chunk ids held by the floors of `core.rerank.evidence`: the
    query's words, or a clear margin) is evidence too. `focus`: the query's terms, lower case
    (`seen_share`)."""
    evidence: list[ScoredHit] = []
    pointers: list[ScoredHit] = []
    repeated: list[ScoredHit] = []
    floor = rules.evidence_floor(need)
    for hit in hits:
        strong = hit.confidence >= floor or (
            need is not Need.UNASKED and hit.candidate.chunk_id in vouched
        )
        if not strong and hit.confidence < rules.pointer_confidence:
            continue
        if seen_share(hit.candidate, seen_terms, focus) >= rules.max_seen_overlap:
            if strong:  # the prompt holds the answer; a weak repeat is no answer at all
                repeated.append(hit)
        elif strong:
            evidence.append(hit)
        elif need is not Need.UNASKED and len(pointers) < rules.max_pointers:
            pointers.append(hit)
    return Tiers(evidence, pointers, repeated)


POINTERS_HEADER = (
    "Possibly related earlier turns (not shown; open one with the memory tool's recall, "
    "naming its words, if the answer needs it):"
)


def pointer_line(
    candidate: Candidate, gist_tokens: int, count: Callable[[str], int], focus: Sequence[str]
) -> str:
    """`- ck_… (turns a-b, date): “gist”`: the gist is the chunk's own sentences around the
    best match of the query, cut to `gist_tokens`."""
    gist, _ = excerpt(" ".join(candidate.raw_text.split()), gist_tokens, count, focus)
    day = candidate.first_ts.date().isoformat()
    turns = f"{candidate.turn_start}-{candidate.turn_end}"
    return f"- {candidate.chunk_id} (turns {turns}, {day}): “{gist}”"


def pointers_block(lines: Sequence[str]) -> str | None:
    return "\n".join((POINTERS_HEADER, *lines)) if lines else None
