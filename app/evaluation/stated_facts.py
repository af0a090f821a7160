"""The stated-facts set (`data/stated_facts/`): conversations whose user messages are annotated
with the facts each states, and the extractor's precision and recall on them.

File format (one file per language): `== id | lang | domain | split` opens a conversation,
`@ YYYY-MM-DD HH:MM role` a message whose text follows on the next line, and each
`+ kind | subject | value [| rejected: …]` line under a message one fact it states. A user
message with no `+` line states none (small talk, questions, hypotheticals, quotations).
`+ open | task | key words` marks a task the message sets (asks the assistant for, or says is
to be done) that the conversation does not show done by its end: not a stated fact, it is
what the open-task retention counts (app/evaluation/fact_retention.py).
Values are normalised: amounts as `number UNIT` (currencies as ISO codes), days as ISO dates,
parties and identifiers as written. Only user messages are scored: key facts are what the user
stated.

A predicted fact matches an annotated one of the same kind and the same message: amounts by
number (and currency, when either is money), days exactly, parties and identifiers when one
contains the other (case aside), choices and preferences when the fact's words hold at least
half of the annotated value's content words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import count
from pathlib import Path
from typing import Literal

from app.core.facts import (
    Fact,
    FactChanges,
    FactKind,
    FactStatus,
    SourceMessage,
    apply,
    content_tokens,
    extract,
)
from app.core.proposed import (
    PROPOSE_RULES,
    Proposal,
    ProposalCheck,
    check_proposals,
    parse_proposals,
    proposal_prompt,
    squashed,
)

DATA = Path(__file__).parent / "data" / "stated_facts"
SCORED_KINDS = ("amount", "date", "party", "identifier", "choice", "preference")
TARGET_KINDS = ("amount", "date", "party", "choice")
OPEN_TASK = "open"
_FACT_KIND_NAME = {
    FactKind.AMOUNT: "amount",
    FactKind.DATE: "date",
    FactKind.PARTY: "party",
    FactKind.IDENTIFIER: "identifier",
    FactKind.DECISION: "choice",
    FactKind.PREFERENCE: "preference",
}
_MONEY = frozenset({"EUR", "USD", "GBP", "JPY", "CNY"})


@dataclass(frozen=True)
class AnnotatedFact:
    kind: str
    subject: str
    value: str
    rejected: str | None = None


Speaker = Literal["user", "assistant"]


@dataclass(frozen=True)
class SetMessage:
    role: Speaker
    said_at: datetime
    text: str
    facts: tuple[AnnotatedFact, ...]


@dataclass(frozen=True)
class FactsConversation:
    id: str
    language: str
    domain: str
    split: str
    messages: tuple[SetMessage, ...]


class StatedFactsSetError(ValueError):
    """A line of the set's files that does not follow the format."""


def load_set(directory: Path = DATA) -> list[FactsConversation]:
    conversations: list[FactsConversation] = []
    for path in sorted(directory.glob("*.txt")):
        conversations.extend(_parse(path.read_text(encoding="utf-8"), path.name))
    return conversations


def _parse(text: str, name: str) -> list[FactsConversation]:
    conversations: list[FactsConversation] = []
    header: list[str] | None = None
    messages: list[SetMessage] = []
    lines = text.splitlines()
    index = 0

    def close() -> None:
        if header is not None:
            identifier, language, domain, split = header
            conversations.append(
                FactsConversation(identifier, language, domain, split, tuple(messages))
            )

    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("== "):
            close()
            header, messages = [p.strip() for p in line[3:].split("|")], []
            if len(header) != 4:
                raise StatedFactsSetError(
                    f"{name}:{index}: header needs id | lang | domain | split"
                )
            continue
        if line.startswith("@ "):
            stamp, _, role = line[2:].rpartition(" ")
            if role not in ("user", "assistant"):
                raise StatedFactsSetError(
                    f"{name}:{index}: a message is the user's or the assistant's"
                )
            said_at = datetime.strptime(stamp, "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
            body = lines[index]
            index += 1
            facts: list[AnnotatedFact] = []
            while index < len(lines) and lines[index].startswith("+ "):
                facts.append(_fact(lines[index][2:], name, index + 1))
                index += 1
            speaker: Speaker = "user" if role == "user" else "assistant"
            messages.append(SetMessage(speaker, said_at, body, tuple(facts)))
            continue
        raise StatedFactsSetError(f"{name}:{index}: unexpected line")
    close()
    return conversations


def _fact(line: str, name: str, number: int) -> AnnotatedFact:
    parts = [p.strip() for p in line.split("|")]
    if len(parts) not in (3, 4) or parts[0] not in (*SCORED_KINDS, OPEN_TASK):
        raise StatedFactsSetError(f"{name}:{number}: fact needs kind | subject | value")
    rejected = parts[3].removeprefix("rejected:").strip() if len(parts) == 4 else None
    return AnnotatedFact(parts[0], parts[1], parts[2], rejected)


# ---- scoring -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PredictedFact:
    kind: str
    text: str
    value: str | None


@dataclass
class Tally:
    found: int = 0  # predicted facts that match an annotated one
    predicted: int = 0
    matched: int = 0  # annotated facts some prediction matches
    annotated: int = 0

    @property
    def precision(self) -> float | None:
        return self.found / self.predicted if self.predicted else None

    @property
    def recall(self) -> float | None:
        return self.matched / self.annotated if self.annotated else None

    def add(self, other: Tally) -> None:
        self.found += other.found
        self.predicted += other.predicted
        self.matched += other.matched
        self.annotated += other.annotated


@dataclass(frozen=True)
class MessageScore:
    conversation: str
    language: str
    split: str
    text: str
    kind: str
    tally: Tally
    missed: tuple[str, ...]
    spurious: tuple[str, ...]


@dataclass
class ExtractionReport:
    scores: list[MessageScore] = field(default_factory=list)
    kept: list[Proposal] = field(default_factory=list)  # a chat model's, its message says them
    dropped: list[Proposal] = field(default_factory=list)  # a chat model's, dropped by the check

    def tally(
        self, kind: str | None = None, language: str | None = None, split: str | None = None
    ) -> Tally:
        total = Tally()
        for score in self.scores:
            if (
                (kind is None or score.kind == kind)
                and (language is None or score.language == language)
                and (split is None or score.split == split)
            ):
                total.add(score.tally)
        return total


def _amount_parts(value: str) -> tuple[float | None, str]:
    number, _, unit = value.partition(" ")
    try:
        return float(number), unit.strip()
    except ValueError:
        return None, unit.strip()


def matches(annotated: AnnotatedFact, predicted: PredictedFact) -> bool:
    if annotated.kind != predicted.kind:
        return False
    if annotated.kind == "amount":
        want, want_unit = _amount_parts(annotated.value)
        got, got_unit = _amount_parts(predicted.value or "")
        if want is None or got is None or abs(want - got) > 1e-6:
            return False
        return not ({want_unit, got_unit} & _MONEY) or want_unit == got_unit
    if annotated.kind == "date":
        return annotated.value == predicted.value
    if annotated.kind in ("party", "identifier"):
        wanted, given = squashed(annotated.value), squashed(predicted.value or "")
        return bool(given) and (wanted in given or given in wanted)
    words = content_tokens(annotated.value)
    if not words:
        return False
    return len(words & content_tokens(predicted.text)) / len(words) >= 0.5


# A chat model as the scorer calls it: (system, user) → its answer's text.
Proposer = Callable[[str, str], str]


def _proposed(
    propose: Proposer | None, source: SourceMessage, report: ExtractionReport
) -> ProposalCheck:
    """What a chat model proposes for a user message, checked as a turn checks it."""
    if propose is None or source.role != "user":
        return ProposalCheck()
    answer = propose(PROPOSE_RULES, proposal_prompt([source]))
    proposals = parse_proposals(answer)
    check = check_proposals(proposals, [source])
    report.dropped.extend(check.dropped)
    report.kept.extend(p for p in proposals if p not in check.dropped)
    return check


def predicted_by_message(
    conversation: FactsConversation,
    propose: Proposer | None = None,
    report: ExtractionReport | None = None,
) -> list[list[PredictedFact]]:
    """What the extractor takes from each message, walking the conversation in order with the
    facts active before each message (as a session would, one message per turn); with
    `propose`, a chat model's checked proposals too (their tally goes to `report`)."""
    active: list[Fact] = []
    result: list[list[PredictedFact]] = []
    tally = report if report is not None else ExtractionReport()
    for turn, message in enumerate(conversation.messages, start=1):
        source = SourceMessage(turn, turn, message.role, message.text, message.said_at)
        check = _proposed(propose, source, tally)
        changes = extract([source], active, proposed=check.by_message())
        result.append(
            [
                PredictedFact(_FACT_KIND_NAME[f.kind], f.text, f.value)
                for f in changes.new
                if f.kind in _FACT_KIND_NAME
            ]
        )
        active = _after(active, changes)
    return result


def _after(active: list[Fact], changes: FactChanges) -> list[Fact]:
    """The active facts after `changes` (core.facts.apply), new ones numbered as a store
    would number them."""
    ids = count(max((f.id or 0 for f in active), default=0) + 1)
    after = [f if f.id is not None else replace(f, id=next(ids)) for f in apply(active, changes)]
    return [f for f in after if f.status is FactStatus.ACTIVE]


def score_extraction(
    conversations: Iterable[FactsConversation], propose: Proposer | None = None
) -> ExtractionReport:
    """Precision and recall of the rules (with `propose`: and of a chat model's checked
    proposals) on the set's user messages."""
    report = ExtractionReport()
    for conversation in conversations:
        predictions = predicted_by_message(conversation, propose, report)
        for message, predicted in zip(conversation.messages, predictions, strict=True):
            if message.role != "user":
                continue
            for kind in SCORED_KINDS:
                want = [f for f in message.facts if f.kind == kind]
                got = [p for p in predicted if p.kind == kind]
                if not want and not got:
                    continue
                hit = [p for p in got if any(matches(a, p) for a in want)]
                found = [a for a in want if any(matches(a, p) for p in got)]
                report.scores.append(
                    MessageScore(
                        conversation.id,
                        conversation.language,
                        conversation.split,
                        message.text,
                        kind,
                        Tally(len(hit), len(got), len(found), len(want)),
                        tuple(a.value for a in want if a not in found),
                        tuple(p.value or p.text for p in got if p not in hit),
                    )
                )
    return report


@dataclass(frozen=True)
class ExtractionRow:
    """Precision and recall of one kind, in one language, on one split ("all": every one)."""

    kind: str
    language: str
    split: str
    precision: float | None
    recall: float | None
    annotated: int
    predicted: int


SPLITS = ("dev", "test", "holdout", "holdout2")


def extraction_rows(report: ExtractionReport) -> list[ExtractionRow]:
    rows: list[ExtractionRow] = []
    for split in (*SPLITS, None):
        for language in ("en", "zh", None):
            for kind in SCORED_KINDS:
                tally = report.tally(kind, language, split)
                rows.append(
                    ExtractionRow(
                        kind,
                        language or "all",
                        split or "all",
                        tally.precision,
                        tally.recall,
                        tally.annotated,
                        tally.predicted,
                    )
                )
    return rows
