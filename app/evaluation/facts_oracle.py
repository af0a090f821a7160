"""A scripted chat model that knows the stated-facts set's answers: the headroom of a model's
proposed facts (app/core/proposed.py), measured without a model (docs/EVAL.md).

For each message it is shown it proposes the facts the set annotates there, each with the
sentence that says it as its words. With `error_rate` it is wrong on that share of the user
messages, in the two ways a model is: it invents a fact (an amount, a party, an identifier or
a day the message never says) or it takes a fact from a message that states none (a number of
a question, a hypothetical or small talk). The first kind must never pass the check; the
second passes where the message is a plain statement, and costs precision.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import date

from app.core.facts import sentences
from app.core.proposed import squashed
from app.core.stated import days_named, numbers_said
from app.evaluation.stated_facts import (
    SCORED_KINDS,
    AnnotatedFact,
    FactsConversation,
    SetMessage,
    score_extraction,
)

_SHOWN = re.compile(r"^\[(\d+)\](?: \(written [\d-]+\))?\n", re.MULTILINE)


def _draw(*parts: str) -> float:
    digest = hashlib.sha256("|".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass
class FactsOracle:
    conversations: list[FactsConversation]
    error_rate: float = 0.0
    invented: list[tuple[str, str]] = field(default_factory=list)  # (kind, value) made up
    unstated: list[tuple[str, str]] = field(default_factory=list)  # taken from no statement

    def __post_init__(self) -> None:
        self._messages = {m.text: m for c in self.conversations for m in c.messages}

    def reply(self, system: str, user: str) -> str:
        """The proposals for the messages of a `proposal_prompt`, as the model answers them."""
        facts: list[dict[str, object]] = []
        for number, text in _shown(user):
            message = self._messages.get(text)
            if message is None:
                continue
            facts += [_item(number, fact, message) for fact in message.facts]
            if _draw(text, "wrong") < self.error_rate:
                facts.append(self._wrong(number, message))
        return json.dumps({"facts": facts}, ensure_ascii=False)

    def _wrong(self, number: int, message: SetMessage) -> dict[str, object]:
        """A made-up fact for a message with facts; for one without, a number it says taken
        for an amount."""
        said = sorted(numbers_said(message.text))
        if not message.facts and said:
            value = f"{said[-1]:g} EUR"
            self.unstated.append(("amount", value))
            return _proposal(number, "amount", "", value, message.text)
        kind, value = _invention(message.text)
        self.invented.append((kind, value))
        return _proposal(number, kind, "", value, first_sentence(message.text))


def _shown(prompt: str) -> list[tuple[int, str]]:
    """(number, text) of each message a `proposal_prompt` shows."""
    marks = list(_SHOWN.finditer(prompt))
    shown = []
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        end = following.start() if following is not None else len(prompt)
        shown.append((int(mark.group(1)), prompt[mark.end() : end].rstrip("\n")))
    return shown


def first_sentence(text: str) -> str:
    return next(iter(sentences(text)), text)


def _invention(text: str) -> tuple[str, str]:
    """A fact the message does not say, of a kind picked by the message."""
    pick = _draw(text, "kind")
    if pick < 0.4:
        said = numbers_said(text)
        number = next(n for n in (48_750.0, 3_125.0, 917.0, 61_000.0) if n not in said)
        return "amount", f"{number:g} EUR"
    if pick < 0.6:
        return "party", "Morgan Ellery" if pick < 0.5 else "欧阳振华"
    if pick < 0.8:
        return "identifier", "ZX-40417"
    return "date", "2027-11-29"


def _proposal(number: int, kind: str, subject: str, value: str, words: str) -> dict[str, object]:
    return {
        "message": number,
        "kind": kind,
        "subject": subject,
        "value": value,
        "words": words,
        "rejected": "",
    }


def _item(number: int, fact: AnnotatedFact, message: SetMessage) -> dict[str, object]:
    item = _proposal(number, fact.kind, fact.subject, fact.value, _words(fact, message))
    item["rejected"] = fact.rejected or ""
    return item


def _words(fact: AnnotatedFact, message: SetMessage) -> str:
    """The sentence that says the fact, or the whole message when none alone does."""
    for sentence in sentences(message.text):
        if _says(fact, sentence, message):
            return sentence
    return message.text


def _says(fact: AnnotatedFact, sentence: str, message: SetMessage) -> bool:
    if fact.kind == "amount":
        number = fact.value.partition(" ")[0]
        return float(number) in numbers_said(sentence)
    if fact.kind == "date":
        named = days_named(sentence, message.said_at)
        return fact.value in named or float(date.fromisoformat(fact.value).day) in numbers_said(
            sentence
        )
    return squashed(fact.value) in squashed(sentence)


@dataclass(frozen=True)
class HeadroomRow:
    """Precision and recall of one kind on one split (`all`: every one), with the rules alone
    or with a scripted model's proposals; `made_up`: facts it invented, `made_up_kept`: those
    the check let through."""

    helper: str
    split: str
    kind: str
    precision: float | None
    recall: float | None
    made_up: int
    made_up_kept: int


HELPERS = (("rules only", None), ("scripted model", 0.0), ("scripted model, wrong on 10 %", 0.1))
HEADROOM_SPLITS = ("all", "holdout", "holdout2")


def headroom_rows(conversations: list[FactsConversation]) -> list[HeadroomRow]:
    rows: list[HeadroomRow] = []
    for helper, error_rate in HELPERS:
        oracle = FactsOracle(conversations, error_rate) if error_rate is not None else None
        report = score_extraction(conversations, oracle.reply if oracle else None)
        dropped = {(p.fact.kind.value, p.fact.value) for p in report.dropped}
        made_up = oracle.invented if oracle else []
        kept = sum(1 for fact in made_up if fact not in dropped)
        for split in HEADROOM_SPLITS:
            for kind in SCORED_KINDS:
                tally = report.tally(kind, split=None if split == "all" else split)
                rows.append(
                    HeadroomRow(
                        helper, split, kind, tally.precision, tally.recall, len(made_up), kept
                    )
                )
    return rows
