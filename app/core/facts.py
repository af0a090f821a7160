"""Key facts (C2): extracted from new messages only, never rewritten, only superseded.

Policy (a summary must never weaken a constraint, docs/DESIGN.md §1):
- A sentence with a scope or obligation word (只 / 仅 / 不要 / 必须 / only / never / must …) is a
  constraint; 喜欢 / 希望 / prefer / I'd like … a preference; "wait for the user to confirm,
  then export" / "确认后再导出" a pending action; 决定 / 就用 / let's go with … a decision; an
  enumerated list (方案一 … / 1. … / option A …) a set of options; other sentences with
  numbers are number facts. Clauses split at a comma when the next one opens with a cue.
- A change (改成 / 换成 / change to / instead …) or a cancellation (取消 / 算了 / 不要…了 /
  cancel / no longer / forget about …) supersedes the active fact it shares the most content
  with; the old fact stays, marked superseded by the new one.
- A user's confirmation (确认了 / 可以导出 / confirmed / go ahead …) resolves the most recent
  open pending action, preferring one it shares content with.
- A decision that points at an option by its ordinal ("第二个方案", "the second one") carries
  that option's text, so the decision still names it after the list left the window.
- What a user's sentence states (app/core/stated.py) is kept apart, one fact per amount, day,
  party or identifier, with its subject and normalised value ("pilot budget" / "48500 EUR").
  A later statement of the same kind whose subject shares a content word supersedes it (an
  amount only by one of the same kind of unit: money by money); facts of one message never
  supersede each other. A change sentence whose stated facts superseded something makes no
  decision besides, unless a constraint or other fact of its own is what it changes. A
  sentence with a stated amount or day is not also a number fact.
- Two constraints, preferences or pending actions whose content words overlap at
  `near_duplicate` or more are one (the first stands, with its source), unless they differ in
  a number or a short code ("crate A" is not "crate C").
- Bounded: at most `max_active` facts of a kind are active. Past that the oldest of the kind
  expires (kept, with its source, but out of the notes); its words stay in the transcript and
  the archive, where recall finds them. The newest statement of a kind is the likeliest to
  hold, and an unbounded set makes every turn read and weigh all of them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from enum import StrEnum
from functools import lru_cache

from app.core.lexical import distinct_terms, term_set
from app.core.pace import pace
from app.core.stated import DayContext, Stated, StatedKind, has_cjk, stated_in, states_nothing


class FactKind(StrEnum):
    CONSTRAINT = "constraint"
    PREFERENCE = "preference"
    NUMBER = "number"
    NAME = "name"
    PENDING_ACTION = "pending_action"
    DECISION = "decision"
    OPTION = "option"
    AMOUNT = "amount"
    DATE = "date"
    PARTY = "party"
    IDENTIFIER = "identifier"


STATED_KINDS = {
    StatedKind.AMOUNT: FactKind.AMOUNT,
    StatedKind.DATE: FactKind.DATE,
    StatedKind.PARTY: FactKind.PARTY,
    StatedKind.IDENTIFIER: FactKind.IDENTIFIER,
}


class FactStatus(StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    RESOLVED = "resolved"
    EXPIRED = "expired"  # aged out by the per-kind bound


@dataclass(frozen=True)
class Fact:
    kind: FactKind
    text: str
    source_turn: int
    source_seq: int | None
    role: str = "user"
    ordinal: int | None = None
    status: FactStatus = FactStatus.ACTIVE
    id: int | None = None
    subject: str | None = None  # a stated fact's subject: "pilot budget"
    value: str | None = None  # a stated fact's normalised value: "48500 EUR"
    carried: CarriedFrom | None = None  # a fact a session started from (`carry_facts`)


@dataclass(frozen=True)
class CarryFacts:
    """A turn's request to start from facts of another session of its tenant."""

    from_session: str
    fact_ids: tuple[int, ...]


@dataclass(frozen=True)
class CarriedFrom:
    """Where a carried fact was said: the session (its public id) and the fact's id there."""

    session_id: str
    fact_id: int


@dataclass(frozen=True)
class SourceMessage:
    seq: int
    turn: int
    role: str
    text: str
    said_at: datetime | None = None


@dataclass
class FactChanges:
    """`new` facts to insert; `superseded` pairs (old fact id, index into `new` or None for a
    plain cancellation); `resolved` ids of pending actions now done; `expired` ids of facts
    the per-kind bound retired; `options_named` the source seqs of the options whose text a
    new decision carries."""

    new: list[Fact] = field(default_factory=list)
    superseded: list[tuple[int, int | None]] = field(default_factory=list)
    resolved: list[int] = field(default_factory=list)
    expired: list[int] = field(default_factory=list)
    options_named: list[int] = field(default_factory=list)


# Not 别: it hides in 特别 and 区别.
CONSTRAINT_ZH = tuple(
    "只 仅 不要 不能 不得 禁止 必须 务必 一定要 不许 严禁 至少 最多 不超过".split()
)
PREFERENCE_ZH = tuple("喜欢 偏好 希望 最好 倾向 尽量".split())
DECISION_ZH = tuple("决定 定了 就用 选用 采用 就按 确定用".split())
CHANGE_ZH = tuple("改成 换成 改为 换为 改用".split())
CANCEL_ZH = tuple("取消 算了 不用了 不需要了".split())
CUES_ZH = CONSTRAINT_ZH + PREFERENCE_ZH + DECISION_ZH + CHANGE_ZH + CANCEL_ZH
CONSTRAINT_EN = re.compile(
    r"\b(only|never|must|must not|mustn't|do not|don't|always|at most|at least|no more than|"
    r"exclusively|cannot|can't)\b",
    re.IGNORECASE,
)
PREFERENCE_EN = re.compile(r"\b(prefer|i'd like|i would like|i like|rather|favou?rite)\b", re.I)
DECISION_EN = re.compile(
    r"\b(decided|let's go with|let us go with|we'll go with|we will use|we'll use|agreed to|"
    r"chose|going with|settled on|go with)\b",
    re.IGNORECASE,
)
# A choice made without a decision word: "we'll refund to the card rather than issue a credit
# note", "走陆运，不走空运", "那京都住三晚" (那 answering a suggestion).
CHOICE_EN = re.compile(
    r"\b(?:we|we'll|we're|we will|we are|let's|let us|i'll|i will)\b.*"
    r"\b(?:rather than|instead of|as the \w+, not|, not)\b",
    re.IGNORECASE,
)
CHOICE_ZH = re.compile(
    r"[，,]\s*(?:就|也|而|都)?不再?(?!能|要|会|得|许|超过|少于|低于|高于|行|对|错|好|太|够|过|了|知道|然|同|少|多|是|一定)"
    r"[\u4e00-\u9fff]|就?不考虑|^那(?:就|还是|我们)?(?![么你他她它些样只个家位天次边里种条件本张时年儿])[\u4e00-\u9fff]"
)
CHANGE_EN = re.compile(r"\b(change\b.{0,40}?\bto|switch to|instead|replace)\b", re.I)
CANCEL_EN = re.compile(r"\b(cancel|no longer|forget about|never mind|scrap)\b", re.IGNORECASE)
PENDING = re.compile(
    r"(确认后|确认之后|等.{0,12}确认|待确认|之后再|回复后再|\bonce\b.{0,40}\bconfirm|"
    r"\bafter\b.{0,40}\bconfirm|\bwait(?:ing)? for\b.{0,40}\b(?:confirm|approv|go-ahead)|"
    r"\buntil\b.{0,40}\bconfirm|\bwhen\b.{0,30}\bconfirms?\b)",
    re.IGNORECASE,
)
CONFIRM = re.compile(
    r"(已确认|确认了|确认无误|可以导出|可以了|没问题|同意|就这样|"
    r"\bconfirmed\b|\bi confirm\b|\bgo ahead\b|\bapproved\b|\byes,? (?:please|do it|go))",
    re.IGNORECASE,
)
# A number worth keeping: with a unit or currency, a time, a date, a percentage or a code.
NUMBER = re.compile(
    r"\d[\d,.]*\s*(?:%|％|元|万|亿|美元|块|dollars?\b|usd\b|rmb\b|eur\b|kg\b|km\b|gb\b|mb\b|"
    r"ms\b|秒|分钟|小时|天|周|个月|年|次|件|箱|人|days?\b|hours?\b|minutes?\b|weeks?\b|"
    r"months?\b|requests?\b|items?\b|units?\b)|\d{1,2}:\d{2}|\d{4}[-/]\d{1,2}|[$¥€£]\s*\d|"
    r"\b[A-Z]{1,6}-\d{2,}",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[。！？!?；;\n])|(?<=\.)\s+")
_OPTION_LINE = re.compile(
    r"^\s*(?:[-*•]\s*)?(?:方案\s*(?P<zh>[一二三四五六七八九十\d]+)|(?P<num>\d+)[.)、]|"
    r"(?:option|plan|proposal)\s+(?P<en>[a-z\d]+))\s*[:：.)]?\s*(?P<text>\S.*)$",
    re.IGNORECASE,
)
_LIST_SPLIT = re.compile(r"[\n；;]")
_ZH_DIGITS = {c: i for i, c in enumerate("一二三四五六七八九十", start=1)}
_ORDINAL_EN = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "1st": 1,
    "2nd": 2,
    "3rd": 3,
    "4th": 4,
    "5th": 5,
}
_ORDINAL_REF = re.compile(
    r"第\s*(?P<zh>[一二三四五六七八九十\d]+)\s*(?:个|种|条)?(?:方案|选项)?|方案\s*(?P<zh2>[一二三四五六七八九十\d]+)|"
    r"\b(?P<en>first|second|third|fourth|fifth|1st|2nd|3rd|4th|5th)\b(?: one| option| plan)?|"
    r"\b(?:option|plan|proposal)\s+(?P<num>\d+|[a-e])\b",
    re.IGNORECASE,
)
STOP_TOKENS = frozenset(
    "the a an to of and or in on for with we i you it is be this that from".split()
)


def _ordinal_value(token: str) -> int | None:
    token = token.strip().lower()
    if token.isdigit():
        return int(token)
    if token in _ZH_DIGITS:
        return _ZH_DIGITS[token]
    if token in _ORDINAL_EN:
        return _ORDINAL_EN[token]
    if len(token) == 1 and "a" <= token <= "e":
        return ord(token) - ord("a") + 1
    return None


def _has_cue(clause: str) -> bool:
    return any(cue in clause for cue in CUES_ZH) or bool(CONSTRAINT_EN.search(clause))


def _starts_with_cue(clause: str) -> bool:
    clause = clause.strip()
    return clause.startswith(CUES_ZH) or bool(CONSTRAINT_EN.match(clause))


def sentences(text: str) -> list[str]:
    """Sentences, verbatim, with clauses split at a comma where the next one opens with a cue
    and the one before it has one too ("只查华东仓，只看缺货商品" and "only the East-China
    warehouse, and only out-of-stock items" are two constraints each)."""
    pace()
    result: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        parts = re.split(r"([，,])", sentence)
        merged = [parts[0]]
        for separator, clause in zip(parts[1::2], parts[2::2], strict=True):
            opens_cue = _starts_with_cue(re.sub(r"^\s*(?:and|but)\s+", "", clause))
            if opens_cue and _has_cue(merged[-1]):
                merged.append(clause)
            else:
                merged[-1] += separator + clause
        result.extend(m.strip(" ，,。.") for m in merged if m.strip(" ，,。."))
    return result


_CUE_CHARS = frozenset("".join(CUES_ZH)) | frozenset("查看用要把的了是在和")


@lru_cache(maxsize=8192)
def content_tokens(text: str) -> frozenset[str]:
    """Words and single CJK characters, without cue and stop words: what two facts share.
    Cached: a fact's text is compared with every sentence that might restate or change it."""
    tokens: set[str] = set()
    for term in distinct_terms(text):
        if re.fullmatch(r"[\u3400-\u9fff]+", term):
            tokens.update(term)
        elif term not in STOP_TOKENS:
            tokens.add(term)
    return frozenset(tokens - _CUE_CHARS)


def options_in(text: str) -> list[tuple[int, str]]:
    """An enumerated list in a message: (ordinal, text) pairs, at least two of them."""
    found: list[tuple[int, str]] = []
    for line in _LIST_SPLIT.split(text):
        match = _OPTION_LINE.match(line)
        if not match:
            continue
        ordinal = _ordinal_value(match.group("zh") or match.group("num") or match.group("en") or "")
        if ordinal is not None:
            found.append((ordinal, match.group("text").strip(" 。.")))
    return found if len(found) >= 2 else []


def referenced_ordinal(text: str) -> int | None:
    match = _ORDINAL_REF.search(text)
    if not match:
        return None
    token = match.group("zh") or match.group("zh2") or match.group("en") or match.group("num")
    return _ordinal_value(token or "")


# 只 after a number or a demonstrative counts animals and things (一只乌龟, 那只猫): a measure
# word, not "only". On the hard set's small talk it was half of all false constraints.
_MEASURE_ZHI = re.compile(r"[\d一二两三四五六七八九十几那这每哪半像]只")


# 要不要 / 能不能 ask "whether": the 不要 / 不能 inside them forbids nothing.
_WHETHER_ZH = re.compile(r"要不要|能不能|可不可以|行不行")


def _has_constraint_zh(sentence: str) -> bool:
    sentence = _WHETHER_ZH.sub("", sentence)
    if any(cue in sentence for cue in CONSTRAINT_ZH if cue != "只"):
        return True
    return "只" in _MEASURE_ZHI.sub("", sentence)


# In English "must", "do not", "at most" bind wherever they stand; "only", "never", "always",
# "can't" do when they open a clause or follow whoever is told ("Never email the customer",
# "we only ship from Suzhou"), not in a statement about something ("the storm never quite
# arrived", "I never know what to say"), which small talk is full of.
_BINDING_EN = re.compile(
    r"\b(must|must not|mustn't|do not|don't|at most|at least|no more than|exclusively)\b",
    re.IGNORECASE,
)
_DIRECTIVE_EN = re.compile(
    r"(?:^|[,;:]\s*|\b(?:and|but|we|you|please|let's|let us)\s+)"
    r"(only|never|always|cannot|can't)\b"
    # or right after an opening imperative verb: "Ship only from Suzhou", "Use only …"
    r"|^(?!(?:i|he|she|it|they|we|you|the|a|an|my|our|his|her|their|this|that|there|these"
    r"|those)\b)[a-z]+(?<!ing)(?<!s)\s+(?:only|never|always)\b",
    re.IGNORECASE,
)


def _has_constraint_en(sentence: str) -> bool:
    clause = sentence.strip()
    return bool(_BINDING_EN.search(clause) or _DIRECTIVE_EN.search(clause))


def classify(sentence: str) -> FactKind | None:
    if PENDING.search(sentence):
        return FactKind.PENDING_ACTION
    if any(cue in sentence for cue in DECISION_ZH) or DECISION_EN.search(sentence):
        return FactKind.DECISION
    if _has_constraint_zh(sentence) or _has_constraint_en(sentence):
        return FactKind.CONSTRAINT
    if CHOICE_EN.search(sentence):
        return FactKind.DECISION
    if any(cue in sentence for cue in PREFERENCE_ZH) or PREFERENCE_EN.search(sentence):
        return FactKind.PREFERENCE
    if CHOICE_ZH.search(sentence):
        return FactKind.DECISION
    if NUMBER.search(sentence):
        return FactKind.NUMBER
    return None


def _is_change(sentence: str) -> bool:
    return any(cue in sentence for cue in CHANGE_ZH) or bool(CHANGE_EN.search(sentence))


def _is_cancel(sentence: str) -> bool:
    no_longer_zh = "不要" in sentence and sentence.rstrip("。.!！").endswith("了")
    return any(c in sentence for c in CANCEL_ZH) or no_longer_zh or bool(CANCEL_EN.search(sentence))


def _best_related(sentence: str, candidates: Sequence[Fact]) -> Fact | None:
    mine = content_tokens(sentence)
    scored = [(len(mine & content_tokens(f.text)), f.source_turn, f) for f in candidates]
    scored = [s for s in scored if s[0] > 0]
    return max(scored, key=lambda s: (s[0], s[1]))[2] if scored else None


_MONEY_UNITS = frozenset({"EUR", "USD", "GBP", "JPY", "CNY"})


def _unit_class(value: str | None) -> str:
    unit = (value or "").partition(" ")[2]
    return "money" if unit in _MONEY_UNITS else unit


def _last_day(active: Sequence[Fact]) -> date | None:
    """The newest day the conversation's facts hold: it places a bare "the 20th"."""
    days = [f for f in active if f.kind is FactKind.DATE and f.value]
    if not days:
        return None
    try:
        return date.fromisoformat(
            max(days, key=lambda f: (f.source_seq or 0, f.id or 0)).value or ""
        )
    except ValueError:
        return None


def subject_terms(subject: str | None) -> frozenset[str]:
    """A stated fact's subject as terms: English words and stems, Chinese bigrams (single
    characters would make 年度预算 and 报价一年 one subject), without stop words."""
    return frozenset(t for t in term_set(subject or "") if t not in STOP_TOKENS)


def _subjects_meet(one: Fact, other: Fact) -> bool:
    mine, theirs = subject_terms(one.subject), subject_terms(other.subject)
    return bool(mine & theirs) or not (mine or theirs)


def _same_subject(fact: Fact, active: Sequence[Fact]) -> Fact | None:
    """The newest active fact of the same kind, said in another message, whose subject shares
    a content word with this one's (amounts: of the same kind of unit)."""
    mine = subject_terms(fact.subject)
    if not mine:
        return None
    for old in reversed(active):
        if old.source_seq == fact.source_seq and old.source_turn == fact.source_turn:
            continue
        if fact.kind is FactKind.AMOUNT and _unit_class(old.value) != _unit_class(fact.value):
            continue
        if mine & subject_terms(old.subject):
            return old
    return None


def _replacement_text(sentence: str, old: Fact) -> str:
    if has_cjk(sentence):
        return f"{sentence}（取代：{old.text}）"
    return f"{sentence} (replaces: {old.text})"


def _choice_text(choice: Stated) -> str:
    """A proposed choice as a decision: "route: rail via Duisburg (not: trucking)"."""
    cjk = has_cjk(choice.value + choice.subject)
    text = choice.value
    if choice.subject:
        text = f"{choice.subject}{'：' if cjk else ': '}{choice.value}"
    if choice.rejected:
        text += f"（不选：{choice.rejected}）" if cjk else f" (not: {choice.rejected})"
    return text


MERGED_KINDS = (FactKind.CONSTRAINT, FactKind.PREFERENCE, FactKind.PENDING_ACTION)


def overlap(one: str, other: str) -> float:
    """Jaccard overlap of two texts' content words: 1.0 for the same thing said twice, and
    0.0 when they differ in a number or a short code ("crate A" is not "crate C")."""
    mine, theirs = content_tokens(one), content_tokens(other)
    if not (mine and theirs) or any(_distinguishes(t) for t in mine ^ theirs):
        return 0.0
    return len(mine & theirs) / len(mine | theirs)


def _distinguishes(token: str) -> bool:
    return any(ch.isdigit() for ch in token) or (token.isascii() and len(token) <= 2)


MUTABLE = (
    FactKind.CONSTRAINT,
    FactKind.PREFERENCE,
    FactKind.NUMBER,
    FactKind.NAME,
    FactKind.DECISION,
    FactKind.PENDING_ACTION,
)
USER_ONLY = (FactKind.CONSTRAINT, FactKind.PREFERENCE, FactKind.NUMBER, FactKind.PENDING_ACTION)


class _Extraction:
    """Walks new messages in order, keeping the active facts current as it goes. Only active
    facts are ever consulted, so they are kept apart (in the order they became active) with an
    index of their texts: a whole history in one call makes thousands of facts, and scanning
    every fact ever made for each sentence made the walk quadratic."""

    def __init__(self, active: Sequence[Fact], near_duplicate: float) -> None:
        self.near_duplicate = near_duplicate
        self.changes = FactChanges()
        self.days = DayContext(last_day=_last_day(active))
        self._active: dict[int, Fact] = {}  # by id(): a fact is the object, not its value
        self._active_texts: Counter[str] = Counter()
        self._new_position: dict[int, int] = {}  # id() of a fact in changes.new -> its index
        for fact in active:
            if fact.status is FactStatus.ACTIVE:
                self._hold(fact)

    def _hold(self, fact: Fact) -> None:
        self._active[id(fact)] = fact
        self._active_texts[fact.text] += 1

    def carry(self, fact: Fact) -> None:
        """A fact another session confirmed: new in this batch and active from the start."""
        self._new_position[id(fact)] = len(self.changes.new)
        self.changes.new.append(fact)
        self._hold(fact)

    def add(self, fact: Fact) -> int:
        if self._active_texts[fact.text]:
            return -1
        if fact.kind in MERGED_KINDS and any(
            overlap(f.text, fact.text) >= self.near_duplicate for f in self.active(fact.kind)
        ):
            return -1  # the same constraint said again: the first, with its source, stands
        if fact.value is not None and any(
            f.value == fact.value and _subjects_meet(f, fact) for f in self.active(fact.kind)
        ):
            return -1  # stated again of the same subject: the first statement stands
        self.carry(fact)
        return len(self.changes.new) - 1

    def retire(self, old: Fact, status: FactStatus, by: int | None = None) -> None:
        if self._active.pop(id(old), None) is not None:
            self._active_texts[old.text] -= 1
        if old.id is None:  # written by this same batch: store it already retired
            position = self._new_position.pop(id(old), None)
            if position is not None:
                self.changes.new[position] = replace(old, status=status)
            return
        if status is FactStatus.RESOLVED:
            self.changes.resolved.append(old.id)
        elif status is FactStatus.EXPIRED:
            self.changes.expired.append(old.id)
        else:
            self.changes.superseded.append((old.id, by if by is not None and by >= 0 else None))

    def active(self, *kinds: FactKind) -> list[Fact]:
        return [f for f in self._active.values() if f.kind in kinds]

    def bound(self, max_active: int) -> None:
        """Expires the oldest active facts of each kind past `max_active`."""
        for kind in FactKind:
            active = self.active(kind)
            for old in active[: max(0, len(active) - max_active)]:
                self.retire(old, FactStatus.EXPIRED)

    def options(self, message: SourceMessage, found: list[tuple[int, str]]) -> None:
        for old in self.active(FactKind.OPTION):
            self.retire(old, FactStatus.SUPERSEDED)
        for ordinal, text in found:
            self.add(Fact(FactKind.OPTION, text, message.turn, message.seq, message.role, ordinal))

    def confirm(self, sentence: str) -> None:
        pending = self.active(FactKind.PENDING_ACTION)
        target = _best_related(sentence, pending) or (pending[-1] if pending else None)
        if target is not None:
            self.retire(target, FactStatus.RESOLVED)

    def annotate(self, sentence: str) -> str:
        """A sentence that points at an option by ordinal, with that option's text attached."""
        ordinal = referenced_ordinal(sentence)
        option = next((f for f in self.active(FactKind.OPTION) if f.ordinal == ordinal), None)
        if option is None:
            return sentence
        if option.source_seq is not None:
            self.changes.options_named.append(option.source_seq)
        if has_cjk(sentence):
            return f"{sentence}（第{ordinal}个方案：{option.text}）"
        return f"{sentence} (option {ordinal}: {option.text})"

    def change(
        self, sentence: str, message: SourceMessage, cancel_only: bool, stated: bool
    ) -> None:
        """`stated`: the sentence's stated facts already superseded what they changed; with
        no other related fact it makes no decision besides."""
        old = _best_related(sentence, self.active(*MUTABLE))
        if old is None and stated:
            return
        text = self.annotate(sentence)
        kind = FactKind.DECISION
        if old is not None and not cancel_only and old.kind is not FactKind.DECISION:
            kind, text = old.kind, _replacement_text(text, old)
        index = self.add(Fact(kind, text, message.turn, message.seq, message.role))
        if old is not None:
            self.retire(old, FactStatus.SUPERSEDED, index)

    def state(self, stated: Stated, message: SourceMessage) -> bool:
        """Adds one stated fact; answers whether it superseded an earlier one."""
        kind = STATED_KINDS[stated.kind]
        text = f"{stated.subject}: {stated.value}" if stated.subject else stated.value
        if stated.words != stated.value:
            text += f" ({stated.words})"
        fact = Fact(
            kind,
            text,
            message.turn,
            message.seq,
            message.role,
            subject=stated.subject,
            value=stated.value,
        )
        old = _same_subject(fact, self.active(kind))
        index = self.add(fact)
        if old is not None and index >= 0:
            self.retire(old, FactStatus.SUPERSEDED, index)
        return old is not None and index >= 0

    def propose(self, proposed: Stated, message: SourceMessage) -> None:
        """A fact a chat model proposed and its message was checked to say
        (app/core/proposed.py): added unless the rules took the same from that message."""
        said_here = [
            f
            for f in self.changes.new
            if f.source_seq == message.seq and f.source_turn == message.turn
        ]
        if proposed.kind is not StatedKind.CHOICE:
            kind = STATED_KINDS[proposed.kind]
            if not any(f.kind is kind and f.value == proposed.value for f in said_here):
                self.state(proposed, message)
            return
        if not any(f.kind is FactKind.DECISION for f in said_here):
            fact = Fact(
                FactKind.DECISION,
                _choice_text(proposed),
                message.turn,
                message.seq,
                message.role,
                subject=proposed.subject or None,
                value=proposed.value,
            )
            self.add(fact)

    def sentence(self, sentence: str, message: SourceMessage) -> None:
        stated = stated_in(sentence, message.said_at, self.days) if message.role == "user" else []
        superseded = [self.state(s, message) for s in stated]
        if message.role == "user" and CONFIRM.search(sentence) and not PENDING.search(sentence):
            self.confirm(sentence)
            return
        # a question or a hypothetical decides and changes nothing
        undecided = states_nothing(sentence)
        if _is_change(sentence) or _is_cancel(sentence):
            if message.role == "user" and not undecided:
                cancel_only = not _is_change(sentence)
                self.change(sentence, message, cancel_only, stated=any(superseded))
            return
        kind = classify(sentence)
        if kind is None or (kind in USER_ONLY and message.role != "user"):
            return
        if (kind is FactKind.NUMBER and stated) or (kind is FactKind.DECISION and undecided):
            return  # a number's amounts and days are facts of their own
        text = self.annotate(sentence) if kind is FactKind.DECISION else sentence
        self.add(Fact(kind, text, message.turn, message.seq, message.role))


def extract(
    messages: Sequence[SourceMessage],
    active: Sequence[Fact],
    max_active: int | None = None,
    near_duplicate: float = 0.8,
    carried: Sequence[Fact] = (),
    proposed: Mapping[int, Sequence[Stated]] | None = None,
) -> FactChanges:
    """The fact changes the new messages make, given the facts active before them (oldest
    first); `max_active`: the bound per kind (None: unbounded); `near_duplicate`: the overlap
    of content words at which a constraint, preference or pending action is one already
    active; `carried`: facts carried from another session, written with this turn's;
    `proposed`: by message seq, facts a chat model proposed that the message says, taken
    after the rules' own."""
    run = _Extraction(active, near_duplicate)
    for fact in carried:  # facts another session confirmed: active before this turn's words
        run.carry(fact)
    for message in messages:
        pace()
        found = options_in(message.text)
        text = message.text
        if found:
            run.options(message, found)
            text = "\n".join(p for p in _LIST_SPLIT.split(text) if not _OPTION_LINE.match(p))
        for sentence in sentences(text):
            run.sentence(sentence, message)
        for said in (proposed or {}).get(message.seq, ()):
            run.propose(said, message)
    if max_active is not None:
        run.bound(max_active)
    return run.changes


def apply(facts: Sequence[Fact], changes: FactChanges) -> list[Fact]:
    """The facts after `changes`: statuses updated, new facts appended (without ids yet)."""
    superseded = {old for old, _ in changes.superseded}
    resolved = set(changes.resolved)
    expired = set(changes.expired)

    def status(fact: Fact) -> FactStatus:
        if fact.id in superseded:
            return FactStatus.SUPERSEDED
        if fact.id in resolved:
            return FactStatus.RESOLVED
        if fact.id in expired:
            return FactStatus.EXPIRED
        return fact.status

    updated = [replace(f, status=status(f)) for f in facts]
    return updated + list(changes.new)
