"""Facts a chat model proposes (optional; docs/DESIGN.md §1, key facts), and the check that
keeps only those its source message says.

With a chat model configured, the turn's user messages are shown to it, numbered, and it
answers the amounts, days, parties, identifiers and choices they state. The rules' facts come
first; a proposal adds what they missed. Policy (the design's "no new entities" rule: a fact
whose key words are not in its source is dropped):
- The answer is a JSON object `{"facts": [{"message", "kind", "subject", "value", "words",
  "rejected"}]}`; an answer that is not one proposes nothing, and an item that lacks a field or
  names no shown message is dropped.
- `words`, the words said for the fact, must be in that message (case and spacing aside), and
  the sentence holding them must state something: not a question, a hypothetical or a quotation
  (the rules' own test).
- The value's key words must be in those words: an amount's number among the numbers they say
  ("48,500", "三万二千", "48.5k"); a day one the rules resolve from them against the moment the
  message was said, or whose day of the month they say; a party, an identifier or a chosen
  option verbatim in the message (an option may also be said in other forms of its words:
  "roll back" for "rolling back"). The subject is a label ("departure" for "I fly out on 3
  March"), not an entity, and is not checked.
- Values are normalised as the rules' are ("€48,500" → "48500 EUR", days as ISO dates), so a
  proposal the rules already made from the same message is recognised as the same fact.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from app.core.facts import SourceMessage, content_tokens, sentences
from app.core.stated import (
    Stated,
    StatedKind,
    amount_value,
    days_named,
    numbers_said,
    states_nothing,
    without_quotes,
)


@dataclass(frozen=True)
class Proposal:
    """One fact the model proposes: `message` numbers a shown message (from 1)."""

    message: int
    fact: Stated


@dataclass(frozen=True)
class ProposalCheck:
    """`kept`: (source seq, the fact with its value normalised) for each proposal its message
    says; `dropped`: the others."""

    kept: tuple[tuple[int, Stated], ...] = ()
    dropped: tuple[Proposal, ...] = ()

    def by_message(self) -> dict[int, list[Stated]]:
        found: dict[int, list[Stated]] = {}
        for seq, fact in self.kept:
            found.setdefault(seq, []).append(fact)
        return found


PROPOSE_RULES = """You read messages a user wrote to an assistant and list the facts they state.
Kinds: amount (a number with its unit or currency), date (a day or a deadline), party (a person
or an organisation with the role the message gives them), identifier (an order number, a code, a
version, a file path), choice (an option the user chose, with the alternative not taken).
Rules:
1. Only what the user states as true or decided. A question, a hypothetical ("if", "what if",
   "如果"), a quotation or a story about the past states nothing.
2. "words": the exact words of the message that say the fact, copied character for character.
3. "value": amounts as "number UNIT" (currencies as ISO codes: 48,500 euros → "48500 EUR",
   三万二千元 → "32000 CNY"); dates as YYYY-MM-DD, resolved against the day the message was
   written; parties, identifiers and choices as written in the message.
4. "subject": what the fact is of, in the message's own words ("pilot budget", "报关").
Answer with JSON only: {"facts": [{"message": 1, "kind": "amount", "subject": "...",
"value": "...", "words": "...", "rejected": ""}]}; {"facts": []} when nothing is stated."""


def proposal_prompt(messages: Sequence[SourceMessage]) -> str:
    """The user messages to read, numbered from 1 in the order given, each with its day."""
    lines = []
    for number, message in enumerate(messages, start=1):
        day = f" (written {message.said_at.date().isoformat()})" if message.said_at else ""
        lines.append(f"[{number}]{day}\n{message.text}")
    return "\n\n".join(lines)


_FENCE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$")


def parse_proposals(answer: str) -> list[Proposal]:
    """The proposals of a model's answer; items that are not whole proposals are skipped."""
    try:
        data = json.loads(_FENCE.sub("", answer))
    except ValueError:
        return []
    items = data.get("facts") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return []
    return [p for p in map(_proposal, items) if p is not None]


def _proposal(item: object) -> Proposal | None:
    if not isinstance(item, dict):
        return None
    number, kind = item.get("message"), item.get("kind")
    texts = [item.get(key, "") for key in ("subject", "value", "words", "rejected")]
    if not isinstance(number, int) or kind not in tuple(StatedKind):
        return None
    if not all(isinstance(text, str) for text in texts):
        return None
    subject, value, words, rejected = (str(text).strip() for text in texts)
    if not (value and words):
        return None
    return Proposal(number, Stated(StatedKind(kind), subject, value, words, rejected))


def check_proposals(
    proposals: Sequence[Proposal], messages: Sequence[SourceMessage]
) -> ProposalCheck:
    """Keeps the proposals their source message says (see the policy), values normalised."""
    kept: list[tuple[int, Stated]] = []
    dropped: list[Proposal] = []
    for proposal in proposals:
        source = messages[proposal.message - 1] if 1 <= proposal.message <= len(messages) else None
        checked = _checked(proposal.fact, source) if source is not None else None
        if checked is None or source is None:
            dropped.append(proposal)
        else:
            kept.append((source.seq, checked))
    return ProposalCheck(tuple(kept), tuple(dropped))


def squashed(text: str) -> str:
    """Text with its spacing and case aside: how words are looked for in a message."""
    return re.sub(r"\s+", "", text).casefold()


def _stating_sentence(words: str, text: str) -> str | None:
    """The sentence of `text` that holds `words` and states something, if any."""
    wanted = squashed(words)
    for sentence in sentences(text):
        if wanted in squashed(without_quotes(sentence)) and not states_nothing(sentence):
            return sentence
    whole = squashed(without_quotes(text))
    # words that span sentences: held by the message, stated unless the whole is a question
    if wanted in whole and not states_nothing(text):
        return text
    return None


def _checked(fact: Stated, source: SourceMessage) -> Stated | None:
    if _stating_sentence(fact.words, source.text) is None:
        return None
    value = _said_value(fact, source)
    if value is None:
        return None
    rejected = fact.rejected if squashed(fact.rejected) in squashed(source.text) else ""
    return Stated(fact.kind, fact.subject, value, fact.words, rejected)


def _said_value(fact: Stated, source: SourceMessage) -> str | None:
    """The fact's value, normalised, if its key words are said; else None."""
    if fact.kind is StatedKind.AMOUNT:
        value = amount_value(fact.value)
        if value is None:
            return None
        number = float(value.partition(" ")[0])
        return value if number in numbers_said(fact.words) else None
    if fact.kind is StatedKind.DATE:
        return _said_day(fact, source)
    if squashed(fact.value) in squashed(source.text):
        return fact.value
    if fact.kind is StatedKind.CHOICE and content_tokens(fact.value) <= content_tokens(source.text):
        return fact.value  # a chosen option in the message's words, another form of them
    return None


def _said_day(fact: Stated, source: SourceMessage) -> str | None:
    try:
        day = date.fromisoformat(fact.value)
    except ValueError:
        return None
    if source.said_at is not None and day.isoformat() in days_named(fact.words, source.said_at):
        return day.isoformat()
    return day.isoformat() if float(day.day) in numbers_said(fact.words) else None
