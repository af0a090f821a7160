"""The long-chats set (docs/RECALL.md): months of casual chat between two named friends, and
the questions a reader of the whole chat would ask, each with the ids of the messages that
answer it. Unlike the hard set (first-person needles asked back in other words), its news
is told as dialogue between small talk, its questions are in the third person, and many
share words with their answer, as questions about real conversations do.

The templates live in `app/evaluation/data/chats_{en,zh}.toml`; `long_chats` lays them out
deterministically: per pair of friends, each fact kind told once by each of them (the two
with different details, so that a question must know who), two per session at most, in
dated sessions a few days apart, with a follow-up of some facts sessions later. Questions:
- `single`: one message answers it;
- `multi_hop`: a follow-up and the fact it follows (the question names neither directly);
- `when`: asked by date ("When did Nadia adopt Biscuit?"), answered by the fact's message;
- `after`: what someone told in the week after an event, answered by that later message.
Each question is marked by whether it shares a content word with its evidence (names aside),
and is `dev` or `test` (alternating within a chat): tune on dev, report both.
"""

from __future__ import annotations

import random
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from functools import cache
from importlib import resources
from typing import Any, Literal

from app.core.lexical import term_set
from app.core.rewrite import content_terms
from app.evaluation.hard_set import Language

QuestionKind = Literal["single", "multi_hop", "when", "after"]
QUESTION_KINDS: tuple[QuestionKind, ...] = ("single", "multi_hop", "when", "after")
FACTS_PER_SESSION = 2
QUIET_SESSION_SHARE = 0.35  # sessions of small talk only
SESSION_GAP_DAYS = (2, 3, 3, 4, 5, 6)
SMALL_TALK_LINES = (8, 18)  # per session, before, between and after its news
FIXED_SMALL_TALK_SHARE = 0.3  # the rest is made of parts (`chatter` in the templates)
FOLLOW_AFTER_SESSIONS = 3  # a follow-up comes at least this many sessions later
AFTER_DAYS = (2, 9)  # "the week after": a later fact by the same speaker within these days
FIRST_DAY = date(2026, 1, 5)
AFTER_QUESTION: dict[Language, str] = {
    "en": "What news did {who} share in the week after {event}?",
    "zh": "{event}之后的那一周，{who}说了什么新鲜事？",
}


@dataclass(frozen=True)
class ChatMessage:
    id: str
    speaker: str
    role: Literal["user", "assistant"]  # the first friend's messages are the user's
    text: str
    at: datetime


@dataclass(frozen=True)
class ChatQuestion:
    id: str
    kind: QuestionKind
    text: str
    evidence: tuple[str, ...]  # message ids: all of them answer it
    answer: str  # the detail asked for, as said
    overlap: bool  # shares a content word, names aside, with its evidence
    split: Literal["dev", "test"]


@dataclass
class LongChat:
    id: str
    language: Language
    speakers: tuple[str, str]
    sessions: list[list[ChatMessage]] = field(default_factory=list)
    questions: list[ChatQuestion] = field(default_factory=list)

    @property
    def messages(self) -> list[ChatMessage]:
        return [m for session in self.sessions for m in session]

    @property
    def asked_at(self) -> datetime:
        return self.sessions[-1][-1].at + timedelta(days=2)


@cache
def templates(language: Language) -> dict[str, Any]:
    text = resources.files("app.evaluation.data").joinpath(f"chats_{language}.toml").read_text()
    return tomllib.loads(text)


@dataclass
class _Told:
    """A fact as one speaker tells it: its slots filled, where it lands once laid out."""

    kind: dict[str, Any]
    speaker: str
    slots: dict[str, str]
    statement: str
    message_id: str = ""
    day: date = FIRST_DAY
    follow: _Told | None = None  # what became of it, told sessions later (multi-hop)


def _fill(kind: dict[str, Any], rng: random.Random, taken: dict[str, str]) -> dict[str, str]:
    """A value per slot, none the other speaker already has for this kind."""
    return {
        name: rng.choice([v for v in values if v != taken.get(name)] or values)
        for name, values in kind["slots"].items()
    }


def _told(language: Language, speakers: tuple[str, str], rng: random.Random) -> list[_Told]:
    told = []
    for kind in templates(language)["fact"]:
        taken: dict[str, str] = {}
        for speaker in speakers:
            slots = _fill(kind, rng, taken)
            taken = slots
            fact = _Told(kind, speaker, slots, rng.choice(kind["say"]).format(**slots))
            for follow in kind.get("follow", ()):  # one per kind at most
                more = {**slots, **_fill(follow, rng, {})}
                fact.follow = _Told(follow, speaker, more, rng.choice(follow["say"]).format(**more))
            told.append(fact)
    rng.shuffle(told)
    return told


def _session_plan(told: list[_Told], rng: random.Random) -> list[list[_Told]]:
    """Facts per session, in order; follow-ups a few sessions after what they follow."""
    sessions: list[list[_Told]] = []
    for start in range(0, len(told), FACTS_PER_SESSION):
        sessions.append(told[start : start + FACTS_PER_SESSION])
        if rng.random() < QUIET_SESSION_SHARE:
            sessions.append([])
    for index, facts in enumerate(list(sessions)):
        for fact in facts:
            if fact.follow is not None:
                later = min(len(sessions) - 1, index + FOLLOW_AFTER_SESSIONS + rng.randrange(3))
                if later == index:
                    sessions.append([])
                    later = len(sessions) - 1
                sessions[later].append(fact.follow)
    return sessions


def _small_talk(words: dict[str, Any], count: int, rng: random.Random) -> list[str]:
    """`count` lines of small talk: a few of the fixed ones, the rest made of parts."""
    parts = words["chatter"]
    lines: list[str] = []
    while len(lines) < count:
        if rng.random() < FIXED_SMALL_TALK_SHARE:
            line = rng.choice(words["small_talk"])
        else:
            slots = {name: rng.choice(values) for name, values in parts.items() if name != "lines"}
            line = rng.choice(parts["lines"]).format(**slots)
        if line not in lines:
            lines.append(line)
    return lines


def _session_messages(
    chat: LongChat, index: int, day: date, facts: list[_Told], rng: random.Random
) -> list[ChatMessage]:
    words = templates(chat.language)
    first, second = chat.speakers
    opener = rng.choice(chat.speakers)
    other = second if opener == first else first
    said: list[tuple[str, str, _Told | None]] = [
        (opener, rng.choice(words["greetings"]).format(other=other), None),
        (other, rng.choice(words["replies"]), None),
    ]
    chatter = iter(_small_talk(words, rng.randint(*SMALL_TALK_LINES), rng))
    speaker = opener
    for fact in facts:
        for _ in range(rng.randint(0, 3)):
            line = next(chatter, None)
            if line is not None:
                said.append((speaker, line, None))
                speaker = other if speaker == opener else opener
        listener = second if fact.speaker == first else first
        said.append((fact.speaker, fact.statement, fact))
        said.append((listener, rng.choice(words["reactions"]), None))
    said += [((opener, other)[i % 2], line, None) for i, line in enumerate(chatter)]
    said.append((rng.choice(chat.speakers), rng.choice(words["closings"]), None))
    start = datetime.combine(day, time(rng.randint(8, 20), rng.randint(0, 59)), tzinfo=UTC)
    messages = []
    for position, (who, text, told) in enumerate(said):
        message_id = f"{chat.id}-s{index:02d}-m{position:02d}"
        role: Literal["user", "assistant"] = "user" if who == first else "assistant"
        at = start + timedelta(minutes=2 * position)
        messages.append(ChatMessage(message_id, who, role, text, at))
        if told is not None:  # where the fact landed, for its questions
            told.message_id, told.day = message_id, day
    return messages


@dataclass(frozen=True)
class _Asked:
    kind: QuestionKind
    text: str
    evidence: tuple[str, ...]
    answer: str


def _asked_of(chat: LongChat, fact: _Told, told: list[_Told]) -> list[_Asked]:
    """Every question about `fact`: its own, by date, through its follow-up, and the week
    after it."""
    slots = {**fact.slots, "who": fact.speaker}
    evidence = (fact.message_id,)
    found = [
        _Asked("single", ask["q"].format(**slots), evidence, fact.slots[ask["answer"]])
        for ask in fact.kind["ask"]
    ]
    if "when" in fact.kind:
        found.append(
            _Asked("when", fact.kind["when"].format(**slots), evidence, fact.day.isoformat())
        )
    follow = fact.follow
    if follow is not None:
        both = (fact.message_id, follow.message_id)
        more = {**follow.slots, "who": fact.speaker}
        found += [
            _Asked("multi_hop", ask["q"].format(**more), both, more[ask["answer"]])
            for ask in follow.kind["ask"]
        ]
    later = _told_after(fact, told)
    if later is not None:
        event = fact.kind["event"].format(**fact.slots)
        text = AFTER_QUESTION[chat.language].format(who=fact.speaker, event=event)
        found.append(_Asked("after", text, (later.message_id,), later.statement))
    return found


def _told_after(fact: _Told, told: list[_Told]) -> _Told | None:
    """The first fact the same speaker told 2–9 days after `fact`, if any."""
    low, high = AFTER_DAYS
    later = [
        other
        for other in told
        if other.speaker == fact.speaker and low <= (other.day - fact.day).days <= high
    ]
    return min(later, key=lambda other: (other.day, other.message_id), default=None)


def shares_words(question: str, evidence: str, names: Sequence[str]) -> bool:
    """Whether the question and its evidence share a content word other than a speaker's
    name (the service writes the speaker before each message, so a name always matches)."""
    named = {term for name in names for term in content_terms(name)}
    return bool((set(content_terms(question)) - named) & term_set(evidence))


def long_chat(language: Language, pair: int, seed: int = 7) -> LongChat:
    speakers = tuple(templates(language)["pairs"][pair])
    assert len(speakers) == 2
    chat = LongChat(f"{language}{pair + 1}", language, (speakers[0], speakers[1]))
    rng = random.Random(f"{seed}-{chat.id}")
    told = _told(language, chat.speakers, rng)
    day = FIRST_DAY + timedelta(days=3 * pair)
    for index, facts in enumerate(_session_plan(told, rng)):
        chat.sessions.append(_session_messages(chat, index, day, facts, rng))
        day += timedelta(days=rng.choice(SESSION_GAP_DAYS))
    asked = [question for fact in told for question in _asked_of(chat, fact, told)]
    said = {m.id: m.text for m in chat.messages}
    for number, question in enumerate(asked):
        evidence_text = " ".join(said[i] for i in question.evidence)
        chat.questions.append(
            ChatQuestion(
                id=f"{chat.id}-q{number:03d}",
                kind=question.kind,
                text=question.text,
                evidence=question.evidence,
                answer=question.answer,
                overlap=shares_words(question.text, evidence_text, chat.speakers),
                split="dev" if number % 2 == 0 else "test",
            )
        )
    return chat


def long_chats(seed: int = 7) -> list[LongChat]:
    """Every pair of friends of both languages, English first."""
    return [
        long_chat(language, pair, seed)
        for language in ("en", "zh")
        for pair in range(len(templates(language)["pairs"]))
    ]
