"""Key-fact hit rate: the share of what the stated-facts set's conversations state that is still
in the prompt after 1×, 3× and 10× the window of conversation (docs/EVAL.md).

Each conversation is posted turn by turn through the real pipeline (a user message with the
assistant messages before it), then small talk follows until the session holds `pressure` ×
the window in tokens; the last turn's prompt is read. A fact is in it when its value as the
notes write it ("48500 EUR", "2027-03-14", a name, a code) or its source message, word for
word, is there (the window, a recalled block, or the notes). The facts counted are those that
still hold at the end: a later annotated fact of the same kind and subject replaces an earlier
one. The open-task retention reads the same last prompt for the tasks the set marks open at
the end (`+ open`): one is kept when its source message is in the prompt word for word, or one
line of the notes holds at least half of its key words (its content words; single characters
in Chinese).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from app.core.facts import content_tokens
from app.core.messages import Message
from app.core.results import TurnResult
from app.evaluation.scenarios import FILLER_EN, FILLER_ZH, post
from app.evaluation.stated_facts import OPEN_TASK, AnnotatedFact, FactsConversation, SetMessage
from app.services.context import ServiceContext

PRESSURES = (1, 3, 10)


@dataclass(frozen=True)
class RetentionConfig:
    """`ebbtide eval`'s key-fact hit rate: every conversation of the set at 1×, 3× and 10× a
    2,000-token window; the quick form three conversations (both languages) at 3× and 10×."""

    window: int = 2000
    pressures: tuple[int, ...] = PRESSURES
    conversations: tuple[str, ...] = ()  # ids; empty: all

    @classmethod
    def quick(cls) -> RetentionConfig:
        return cls(window=1500, pressures=(3, 10), conversations=QUICK_CONVERSATIONS)

    def chosen(self, conversations: Sequence[FactsConversation]) -> list[FactsConversation]:
        if not self.conversations:
            return list(conversations)
        return [c for c in conversations if c.id in self.conversations]


# Conversations of the first held-out split (written after the extractor; since read): one
# per language, and one more in English for the open tasks it leaves.
QUICK_CONVERSATIONS = ("ho-en-release", "ho-en-moving", "ho-zh-event")


@dataclass(frozen=True)
class HoldingFact:
    fact: AnnotatedFact
    source: SetMessage


@dataclass(frozen=True)
class RetentionRow:
    pressure: int
    language: str
    facts: int
    in_prompt: int
    in_notes: int  # of those, by their value in the notes block
    open_tasks: int = 0
    open_kept: int = 0  # of those, in the prompt (their message, or a line of the notes)

    @property
    def hit_rate(self) -> float | None:
        return self.in_prompt / self.facts if self.facts else None

    @property
    def open_retention(self) -> float | None:
        return self.open_kept / self.open_tasks if self.open_tasks else None


def holding_facts(conversation: FactsConversation) -> list[HoldingFact]:
    """The conversation's annotated facts that still hold at its end: a later message's facts
    of a kind and subject replace the earlier ones (one message may state several: a range,
    two escalations)."""
    latest: dict[tuple[str, str], list[HoldingFact]] = {}
    for message in conversation.messages:
        said: dict[tuple[str, str], list[HoldingFact]] = {}
        for fact in message.facts:
            if fact.kind == OPEN_TASK:
                continue
            said.setdefault((fact.kind, fact.subject), []).append(HoldingFact(fact, message))
        latest.update(said)
    return [h for group in latest.values() for h in group]


def open_tasks(conversation: FactsConversation) -> list[HoldingFact]:
    """The tasks the conversation leaves open at its end, each with the message that set it."""
    return [
        HoldingFact(fact, message)
        for message in conversation.messages
        for fact in message.facts
        if fact.kind == OPEN_TASK
    ]


def task_kept(task: HoldingFact, prompt: str, notes: str) -> bool:
    """The task's message is in the prompt, or a line of the notes holds at least half of its
    key words."""
    if task.source.text in prompt:
        return True
    wanted = content_tokens(task.fact.value)
    return any(len(wanted & content_tokens(line)) * 2 >= len(wanted) for line in notes.splitlines())


def _filler(rng: random.Random, language: str) -> str:
    pool = FILLER_EN if language == "en" else FILLER_ZH
    return " ".join(rng.sample(pool, 3))


def _turns(conversation: FactsConversation) -> list[list[Message]]:
    turns: list[list[Message]] = []
    pending: list[Message] = []
    for message in conversation.messages:
        pending.append(Message.of(message.role, message.text, created_at=message.said_at))
        if message.role == "user":
            turns.append(pending)
            pending = []
    return turns


def _prompt_text(result: TurnResult) -> str:
    return "\n".join(str(m.get("content") or "") for m in result.messages)


async def retention_of(
    ctx: ServiceContext,
    conversation: FactsConversation,
    *,
    window: int,
    pressure: int,
    session: str,
    seed: int = 5,
) -> RetentionRow:
    rng = random.Random(f"{seed}-{conversation.id}-{pressure}")
    posted = 0
    result: TurnResult | None = None
    for messages in _turns(conversation):
        result = await post(ctx, session, messages, context_window=window)
        posted += sum(ctx.counter.count(m.words) for m in messages)
    moment = conversation.messages[-1].said_at
    while posted < pressure * window:
        moment += timedelta(minutes=5)
        text = _filler(rng, conversation.language)
        said = [Message.of("assistant", "OK.", created_at=moment)]
        said.append(Message.of("user", text, created_at=moment))
        result = await post(ctx, session, said, context_window=window)
        posted += ctx.counter.count(text)
    assert result is not None, "a conversation of the set has no user message"
    prompt = _prompt_text(result)
    notes = result.notes.text or ""
    holding = holding_facts(conversation)
    in_prompt = [h for h in holding if h.source.text in prompt or h.fact.value in prompt]
    in_notes = [h for h in in_prompt if h.fact.value in notes]
    tasks = open_tasks(conversation)
    kept = [t for t in tasks if task_kept(t, prompt, notes)]
    return RetentionRow(
        pressure,
        conversation.language,
        len(holding),
        len(in_prompt),
        len(in_notes),
        len(tasks),
        len(kept),
    )


async def run_retention(
    ctx: ServiceContext,
    conversations: Sequence[FactsConversation],
    *,
    window: int,
    pressures: Sequence[int] = PRESSURES,
    label: str = "retention",
) -> list[RetentionRow]:
    """One row per pressure and language, summed over the conversations."""
    totals: dict[tuple[int, str], list[int]] = {}
    for pressure in pressures:
        for conversation in conversations:
            row = await retention_of(
                ctx,
                conversation,
                window=window,
                pressure=pressure,
                session=f"{label}-{conversation.id}-{pressure}",
            )
            total = totals.setdefault((pressure, conversation.language), [0, 0, 0, 0, 0])
            total[0] += row.facts
            total[1] += row.in_prompt
            total[2] += row.in_notes
            total[3] += row.open_tasks
            total[4] += row.open_kept
    return [
        RetentionRow(pressure, language, *counts) for (pressure, language), counts in totals.items()
    ]
