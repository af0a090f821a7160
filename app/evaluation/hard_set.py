"""The hard recall set (docs/RECALL.md): needles asked back in other words, with distractors
and unanswerable twins, and the conversations that carry them.

The data lives in `app/evaluation/data/` (TOML, read with the standard library): 152
needles, half Chinese and half English, of four kinds (single, split over two messages,
said by a named speaker, asked by date), and small-talk pools. `conversations` lays them
out deterministically: per language two conversations, each holding half the needles and
all of their distractors in its first two thirds, filler up to `pressure × window` tokens,
timestamps from early February to the end of April (a dated needle sits on its own day).

Every needle is either `dev` or `test` (alternating pairs within each language): the
evidence floor is calibrated on `dev` only and reported on both, so that the set does not
grade its own tuning.
"""

from __future__ import annotations

import random
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, timezone
from functools import cache
from importlib import resources
from itertools import pairwise
from typing import Any, Literal

Language = Literal["en", "zh"]
Kind = Literal["single", "split", "speaker", "dated"]
LANGUAGES: tuple[Language, ...] = ("en", "zh")
KINDS: tuple[Kind, ...] = ("single", "split", "speaker", "dated")
CONVERSATIONS_PER_LANGUAGE = 2
# Where each language's conversation lives in the world: dates in questions mean this zone.
ZONES: dict[Language, timezone] = {"en": UTC, "zh": timezone(timedelta(hours=8))}
TIMELINE_START = date(2026, 2, 2)
FACT_REGION_END = date(2026, 3, 31)  # the first two thirds of the turns end here
TIMELINE_END = date(2026, 4, 30)
ASKED_ON = date(2026, 5, 4)
# Participants who post now and then in every conversation, so a name alone finds nothing.
CAST: dict[Language, tuple[str, ...]] = {
    "en": ("Maya", "Tom", "Lena", "Omar"),
    "zh": ("小林", "阿杰", "王姐", "老周"),
}
NAMED_FILLER_SHARE = 0.15
PREFIXED_FACT_SHARE = 0.4  # facts that follow a line of small talk in the same message
ASSISTANT_REPLY_TO_QUESTION: dict[Language, str] = {"en": "Let me check.", "zh": "我查一下。"}


@dataclass(frozen=True)
class HardNeedle:
    id: str
    kind: Kind
    fact: tuple[str, ...]  # one message, or two consecutive ones (split)
    answer: tuple[str, ...]  # every one must be in what is recalled
    question: str
    distractor: str
    twin: str
    speaker: str | None = None
    distractor_speaker: str | None = None
    said_on: date | None = None
    distractor_on: date | None = None

    @property
    def language(self) -> Language:
        return "zh" if self.id.startswith("zh") else "en"

    @property
    def number(self) -> int:
        return int(self.id.rpartition("-")[2])

    @property
    def split_name(self) -> Literal["dev", "test"]:
        """Pairs of numbers alternate (1-2 dev, 3-4 test, …), so that each conversation
        (odd or even numbers) holds both."""
        return "dev" if (self.number - 1) // 2 % 2 == 0 else "test"


@dataclass(frozen=True)
class FillerPool:
    user: tuple[str, ...]
    assistant: tuple[str, ...]


def _read(name: str) -> dict[str, Any]:
    return tomllib.loads(resources.files("app.evaluation").joinpath("data", name).read_text())


def _needle(raw: dict[str, Any]) -> HardNeedle:
    return HardNeedle(
        id=raw["id"],
        kind=raw["kind"],
        fact=tuple(raw["fact"]),
        answer=tuple(raw["answer"]),
        question=raw["question"],
        distractor=raw["distractor"],
        twin=raw["twin"],
        speaker=raw.get("speaker"),
        distractor_speaker=raw.get("distractor_speaker"),
        said_on=_day(raw.get("said_on")),
        distractor_on=_day(raw.get("distractor_on")),
    )


def _day(value: str | None) -> date | None:
    return None if value is None else date.fromisoformat(value)


@cache
def hard_needles() -> tuple[HardNeedle, ...]:
    return tuple(
        _needle(raw)
        for language in LANGUAGES
        for raw in _read(f"hard_recall_{language}.toml")["needle"]
    )


@cache
def filler_pools() -> dict[Language, FillerPool]:
    raw = _read("hard_recall_filler.toml")
    return {
        language: FillerPool(tuple(raw[language]["user"]), tuple(raw[language]["assistant"]))
        for language in LANGUAGES
    }


@dataclass(frozen=True)
class PlannedMessage:
    """A message as the client posts it; `created_at` is its time in the conversation."""

    role: Literal["user", "assistant"]
    content: str
    created_at: datetime
    name: str | None = None


@dataclass(frozen=True)
class Conversation:
    session: str
    language: Language
    needles: tuple[HardNeedle, ...]
    turns: tuple[tuple[PlannedMessage, ...], ...]
    tokens: int  # of every posted message's content
    asked_at: datetime

    def fact_turns(self) -> dict[str, int]:
        """Needle id → the turn holding (the first message of) its fact."""
        found: dict[str, int] = {}
        for index, messages in enumerate(self.turns):
            for needle in self.needles:
                if any(needle.fact[0] in m.content for m in messages):
                    found.setdefault(needle.id, index)
        return found


@dataclass(frozen=True)
class _Item:
    """What one or two user messages at consecutive turns say, and when."""

    texts: tuple[str, ...]
    speaker: str | None
    on: date | None


def _items(needles: Sequence[HardNeedle]) -> list[_Item]:
    items = []
    for needle in needles:
        items.append(_Item(needle.fact, needle.speaker, needle.said_on))
        items.append(_Item((needle.distractor,), needle.distractor_speaker, needle.distractor_on))
    return items


def _turn_for(day: date, region_turns: int) -> int:
    span = (FACT_REGION_END - TIMELINE_START).days
    return 2 + round((day - TIMELINE_START).days / span * (region_turns - 3))


def _place(items: Sequence[_Item], turns: int, rng: random.Random) -> dict[int, tuple[_Item, int]]:
    """Turn → (item, which of its texts). Dated items sit on their day's turns, in date
    order; the others on random free turns of the first two thirds."""
    region = max(6, turns * 2 // 3)
    taken: dict[int, tuple[_Item, int]] = {}
    last = 1
    for item in sorted((i for i in items if i.on is not None), key=lambda i: i.on or date.min):
        assert item.on is not None
        start = max(_turn_for(item.on, region), last + 1)
        for offset, _ in enumerate(item.texts):
            taken[start + offset] = (item, offset)
        last = start + len(item.texts) - 1
    free = [t for t in range(2, region) if t not in taken]
    rng.shuffle(free)
    for item in (i for i in items if i.on is None):
        start = next(t for t in free if all(t + o not in taken for o in range(len(item.texts))))
        for offset, _ in enumerate(item.texts):
            taken[start + offset] = (item, offset)
            if start + offset in free:
                free.remove(start + offset)
    return taken


def _clock(day: date, zone: timezone, minutes: float) -> datetime:
    return datetime.combine(day, time(0, 0), zone) + timedelta(minutes=minutes)


def _timeline(turns: int, placed: dict[int, tuple[_Item, int]], zone: timezone) -> list[datetime]:
    """A time per turn: dated turns at midday of their day, the others spread evenly
    between their neighbours, from 9:00 on the first day to 21:00 on the last."""
    anchors = {
        0: _clock(TIMELINE_START, zone, 9 * 60),
        turns - 1: _clock(TIMELINE_END, zone, 21 * 60),
    }
    for turn, (item, offset) in placed.items():
        if item.on is not None:
            anchors[turn] = _clock(item.on, zone, 12 * 60 + 2 * offset)
    points = sorted(anchors.items())
    times = []
    for (a, at_a), (b, at_b) in pairwise(points):
        for turn in range(a, b):
            times.append(at_a + (at_b - at_a) * ((turn - a) / (b - a)))
    times.append(points[-1][1])
    return times


def _filler_line(pool: FillerPool, rng: random.Random, sentences: int) -> str:
    return " ".join(rng.sample(pool.user, sentences))


def _turn(
    index: int,
    at: datetime,
    slot: tuple[_Item, int] | None,
    language: Language,
    rng: random.Random,
) -> tuple[PlannedMessage, ...]:
    pool = filler_pools()[language]
    messages = []
    if index:
        reply = " ".join(rng.sample(pool.assistant, rng.choice((1, 2))))
        messages.append(PlannedMessage("assistant", reply, at - timedelta(minutes=1)))
    if slot is None:
        name = rng.choice(CAST[language]) if rng.random() < NAMED_FILLER_SHARE else None
        text = _filler_line(pool, rng, rng.choice((1, 2, 3)))
        messages.append(PlannedMessage("user", text, at, name))
    else:
        item, offset = slot
        text = item.texts[offset]
        if offset == 0 and rng.random() < PREFIXED_FACT_SHARE:
            text = f"{_filler_line(pool, rng, 1)} {text}"
        messages.append(PlannedMessage("user", text, at, item.speaker))
    return tuple(messages)


def _mean_tokens(texts: Sequence[str], count: Callable[[str], int]) -> float:
    return sum(count(text) for text in texts) / len(texts)


def _turn_count(
    language: Language, items: Sequence[_Item], target: float, count: Callable[[str], int]
) -> int:
    """Turns for about `target` tokens: item turns carry their text, a reply and now and then
    a line of small talk; filler turns two lines and a reply on average (see `_turn`)."""
    pool = filler_pools()[language]
    line = _mean_tokens(pool.user, count)
    reply = 1.5 * _mean_tokens(pool.assistant, count)
    item_turns = sum(len(i.texts) for i in items)
    items_cost: float = sum(count(t) for i in items for t in i.texts)
    items_cost += item_turns * reply + len(items) * PREFIXED_FACT_SHARE * line
    filler_turns = max(0, round((target - items_cost) / (2 * line + reply)))
    return max(filler_turns + item_turns, 3 * item_turns // 2)


def conversation(
    language: Language,
    part: int,
    *,
    window: int,
    pressure: float,
    count: Callable[[str], int],
    seed: int = 7,
) -> Conversation:
    """Part `part` of the language's needles in a conversation of about `pressure × window`
    tokens."""
    needles = tuple(
        n for n in hard_needles() if n.language == language and n.number % 2 == part % 2
    )
    rng = random.Random(f"{seed}-{language}-{part}")
    items = _items(needles)
    turns = _turn_count(language, items, pressure * window, count)
    placed = _place(items, turns, rng)
    times = _timeline(turns, placed, ZONES[language])
    script = tuple(_turn(t, times[t], placed.get(t), language, rng) for t in range(turns))
    tokens = sum(count(m.content) for messages in script for m in messages)
    asked_at = _clock(ASKED_ON, ZONES[language], 10 * 60)
    return Conversation(f"hard-{language}-{part}", language, needles, script, tokens, asked_at)


def conversations(
    *, window: int, pressure: float, count: Callable[[str], int], seed: int = 7
) -> list[Conversation]:
    return [
        conversation(language, part, window=window, pressure=pressure, count=count, seed=seed)
        for language in LANGUAGES
        for part in range(CONVERSATIONS_PER_LANGUAGE)
    ]
