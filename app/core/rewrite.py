"""Query rewriting for recall (docs/DESIGN.md §4), with no model: rules only, Chinese and English.

Policy:
- A reference ("刚才说的那个方案", "the budget we agreed on", "the second one") marks the
  query as a reference question: recall runs even in `auto` mode and an empty result injects
  an explicit no-match line.
- Entities are pulled out for exact matching: quoted strings, numbers, codes (INV-20931),
  capitalised names, and the Chinese phrases left once cue and question words are removed.
- A reference with almost no content of its own ("what about that one?") is resolved with the
  entities of the last one or two turns, appended to the query.
- Nothing found: the raw query is used as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from app.core.dates import Period, period_in
from app.core.lexical import distinct_terms, sentences

REFERENCE_CUES_ZH = tuple(
    "刚才 刚刚 之前 以前 上次 上回 那个 那份 那条 那家 那次 那些 前面 先前 早先 "
    "第一个 第二个 第三个 最后一个 提到的 说过 说的 讲的 定的 聊的 告诉你的 告诉过你 一开始".split()
)
_RECALL_VERBS = "discussed|mentioned|agreed|decided|picked|chose|said|talked|set|suggested|proposed"
# Cue phrases: removed from the query before searching.
_CUES_EN = (
    r"earlier|before|previous(?:ly)?|last time|as (?:i|we) said|remind me"
    r"|the (?:first|second|third|last|other) one|at the (?:start|beginning)"
    r"|(?:i|we) (?:told|gave|sent|showed) you|you (?:told|gave|sent|showed) (?:me|us)"
    r"|(?:we|you|i) (?:discussed|mentioned|agreed(?: on)?|talked about|decided(?: on)?|said|set"
    r"|picked|chose)"
)
CUES_EN = re.compile(rf"\b(?:{_CUES_EN})\b", re.IGNORECASE)
# Detection also knows "that <thing> we discussed", whose <thing> stays in the query.
REFERENCE_EN = re.compile(
    rf"\b(?:{_CUES_EN}|that \w+(?: \w+){{0,3}} (?:we|you|i) (?:{_RECALL_VERBS}))\b",
    re.IGNORECASE,
)
# Longest first: "是多少" must go before "多少" and "是".
QUESTION_WORDS_ZH = tuple(
    "是多少 多少 是什么 什么时候 什么 是哪个 哪个 哪里 哪儿 哪些 怎么 如何 是否 有没有 "
    "吗 呢 吧 请问 我们 你们 现在 一下 是 的 了 在 要 用 把 和 还 就 都 再 告诉我".split()
)
STOPWORDS_EN = frozenset(
    "a an the of for to in on at by with and or is are was were be been do does did what which "
    "who whom whose when where why how we you i it its that this those these our your my me us "
    "about again now earlier before previous previously said discussed agreed mentioned decided "
    "talked remind last time one please tell can could would should there their they them "
    "picked chose set any some".split()
)
# Capitalised words that open sentences and questions, never names: "Would Caroline" is the
# name Caroline.
NAME_STOPWORDS = frozenset(
    "What Which Who When Where Why How The A An Is Are Was Were Do Does Did Done Can Could "
    "Please Tell Remind We You I It That This These Those And Or But So Ok Okay Yes No Thanks "
    "Would Will Shall Should Has Have Had Having May Might Must Am Be Been Being Let Lets Any "
    "Some Give Show Find Say Said If Then Also Just Now Hi Hey Hello Oh Well Not Our Your My "
    "His Her Their Its There Here On In At For To From With About After Before Since Today "
    "Yesterday Last Next".split()
)
_QUOTED = re.compile(r"[\"“「『'‘]([^\"”」』'’]{2,80})[\"”」』'’]")
_NUMBER = re.compile(r"(?<![\w\-])(?:\d[\d,.:/\-]*\d|\d)%?(?!\w)")
_CODE = re.compile(r"\b[A-Za-z]{1,10}[-_]?\d[\w\-]*\b")
_NAME = re.compile(r"\b[A-Z][\w\-]*(?:\s+[A-Z][\w\-]*)*")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]{2,}")
MAX_CONTEXT_ENTITIES = 6
MIN_OWN_TERMS = 2


@dataclass(frozen=True)
class RewrittenQuery:
    raw: str
    text: str
    terms: tuple[str, ...]
    entities: tuple[str, ...]
    has_reference: bool
    context_entities: tuple[str, ...] = ()
    period: Period | None = None  # the day the question names (`core.dates`)
    expansion: str | None = None  # a model's restatement (`with_expansion`)

    @property
    def question(self) -> str:
        """The question as asked, with what a bare reference was resolved to: what a reader
        (a cross-encoder, a judging model) is shown."""
        if not self.context_entities:
            return self.raw
        return f"{self.raw} ({', '.join(self.context_entities)})"


def with_expansion(query: RewrittenQuery, expansion: str) -> RewrittenQuery:
    """`query` searched for with a model's restatement too: its text embedded after the rule
    rewrite, its content terms added. Entities and the day stay the question's own: a model's
    guess never counts as a name the user typed."""
    terms = tuple(dict.fromkeys((*query.terms, *content_terms(expansion))))
    return replace(query, text=f"{query.text} {expansion}", terms=terms, expansion=expansion)


def has_reference(text: str) -> bool:
    return any(cue in text for cue in REFERENCE_CUES_ZH) or bool(REFERENCE_EN.search(text))


def _strip_cues(text: str) -> str:
    cleaned = CUES_EN.sub(" ", text)
    for phrase in (*REFERENCE_CUES_ZH, *QUESTION_WORDS_ZH):
        cleaned = cleaned.replace(phrase, " ")
    return cleaned


def _names(text: str) -> list[str]:
    names = []
    for match in _NAME.finditer(text):
        words = [w for w in match.group().split() if w not in NAME_STOPWORDS]
        if words:
            names.append(" ".join(words))
    return names


def extract_entities(text: str) -> tuple[str, ...]:
    """Exact-match candidates: quoted strings, codes, numbers, names, Chinese phrases."""
    found: list[str] = [m.group(1).strip() for m in _QUOTED.finditer(text)]
    found += [m.group() for m in _CODE.finditer(text)]
    found += [m.group() for m in _NUMBER.finditer(text)]
    found += _names(text)
    found += [m.group() for m in _CJK_RUN.finditer(_strip_cues(text))]
    return tuple(dict.fromkeys(e for e in found if e.strip()))


def content_terms(text: str) -> tuple[str, ...]:
    """Lexical terms of the query without cue words, question words and stopwords."""
    return tuple(t for t in distinct_terms(_strip_cues(text)) if t not in STOPWORDS_EN)


def rewrite(
    query: str, recent: Sequence[str] = (), asked_at: datetime | None = None
) -> RewrittenQuery:
    """`recent`: the texts of the last one or two turns, oldest first; `asked_at`: when the
    question was asked, which dates in it are read against (none: dates are not read)."""
    return with_recent(rewrite_alone(query, asked_at), recent)


def rewrite_alone(query: str, asked_at: datetime | None = None) -> RewrittenQuery:
    """The query read on its own, as if no turn came before it."""
    terms = content_terms(query)
    return RewrittenQuery(
        raw=query,
        text=_own_text(query) if terms else query,
        terms=terms,
        entities=extract_entities(query),
        has_reference=has_reference(query),
        period=period_in(query, asked_at) if asked_at is not None else None,
    )


def _own_text(query: str) -> str:
    return " ".join(_strip_cues(query).split())


def leans_on_recent(query: RewrittenQuery) -> bool:
    """A reference with almost no content of its own ("what about that one?"), not yet
    resolved: the recent turns say what it points at."""
    return query.has_reference and len(query.terms) < MIN_OWN_TERMS and not query.context_entities


def with_recent(query: RewrittenQuery, recent: Sequence[str]) -> RewrittenQuery:
    """`query` (from `rewrite_alone`) resolved with the newest entities of the recent turns
    where it leans on them; otherwise unchanged. A turn reads its question once and adds the
    recent turns only when recall needs them."""
    if not leans_on_recent(query):
        return query
    recent_entities = [e for text in recent for e in extract_entities(text)]
    context = tuple(dict.fromkeys(reversed(recent_entities)))[:MAX_CONTEXT_ENTITIES]
    if not context:
        return query
    context_terms = (t for c in context for t in content_terms(c))
    return replace(
        query,
        text=" ".join(part for part in (_own_text(query.raw), *context) if part),
        terms=tuple(dict.fromkeys((*query.terms, *context_terms))),
        context_entities=context,
    )


# A turn in `auto` mode whose every term is one of these (and that names nothing) asks for
# nothing the archive could answer: recall skips it, with no embedding and no search.
ACKNOWLEDGEMENTS = frozenset(
    "ok okay okey yes yeah yep yup no nope sure fine great good nice cool thanks thank thx ty "
    "sound sounds pleas please go on continu continue proceed done got it perfect alright right "
    "agre agree 好 好的 好吧 行 可以 嗯 对 是的 谢谢 谢 继续 没问题 收到 明白 了解 知道".split()
)


def is_acknowledgement(query: RewrittenQuery) -> bool:
    """Nothing but acknowledgement words ("ok, thanks", "好的，继续"), no reference, no day."""
    if query.has_reference or query.period is not None:
        return False
    said = (*query.terms, *query.entities)
    return all(term.lower() in ACKNOWLEDGEMENTS for term in said)


_QUESTION_END = ("?", "？")


def embedding_focus(text: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """The part of a query that is embedded, within `max_tokens` (the embedder's cost grows
    with its input: about a millisecond of CPU per word on two cores): all of it when it
    fits; else its question sentences, else its last sentences, the newest kept first and
    each whole; a last sentence longer than the cap gives its final tokens."""
    if count(text) <= max_tokens:
        return text
    pieces = sentences(text)
    questions = [p for p in pieces if p.strip().endswith(_QUESTION_END)]
    kept: list[str] = []
    for piece in reversed(questions or pieces):
        if count("".join([piece, *kept])) > max_tokens:
            break
        kept.insert(0, piece)
    if kept:
        return "".join(kept).strip()
    return _tail_within(pieces[-1] if not questions else questions[-1], max_tokens, count)


def _tail_within(text: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """The longest suffix (cut by characters) of `text` within `max_tokens`."""
    low, high = 0, len(text)  # text[high:] fits, text[low:] may not
    while high - low > 1:
        middle = (low + high) // 2
        if count(text[middle:]) <= max_tokens:
            high = middle
        else:
            low = middle
    return text[high:].strip()
