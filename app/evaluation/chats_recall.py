"""Recall measured on the long-chats set (`app/evaluation/long_chats.py`, docs/RECALL.md):
what `POST /recall` returns for questions about months of chat, beside the flat hybrid
baseline on the same messages.

Each chat is posted through the real pipeline with automatic recall off (what is measured is
the archive `POST /recall` searches, and no recalled block stays in the window), a turn per
message of the first friend (the second friend's messages before it ride along as assistant
messages, each with its speaker's name and time); then every question goes to the recall use
case (the body of `POST /recall`), top 10 within the largest budget, asked two days after
the last session.
A result holds an evidence message when the message's text is in it. R@k (any): some
evidence in the top k by score; R@k (all): every evidence message in it. Counted over the
questions whose evidence had all left the window (the rest are in the prompt already); the
flat baseline (`app/evaluation/flat.py`) over the same questions.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.core.messages import Message
from app.core.results import RecallResult, TurnResult
from app.evaluation.flat import FlatIndex
from app.evaluation.hard_recall import RECALL_DEPTH, recall_top, share_of, share_within
from app.evaluation.hard_set import LANGUAGES
from app.evaluation.long_chats import QUESTION_KINDS, ChatMessage, ChatQuestion, LongChat
from app.evaluation.long_chats import long_chats as all_chats
from app.evaluation.scenarios import post
from app.services.context import ServiceContext

Progress = Callable[[int], None]
# Hears every archived question's recall results and the texts of its evidence (calibration).
ChatRecallSeen = Callable[[ChatQuestion, str, RecallResult, Sequence[str]], None]


@dataclass(frozen=True)
class ChatsConfig:
    window: int = 4000
    seed: int = 7
    chats: tuple[str, ...] = ()  # chat ids; empty: every chat

    @classmethod
    def quick(cls) -> ChatsConfig:
        """One chat of each language in a smaller window: about as many questions archived."""
        return cls(window=2000, chats=("en1", "zh1"))


@dataclass(frozen=True)
class ChatOutcome:
    """One question. Ranks are 1-based, None: not within the top 10."""

    question: ChatQuestion
    language: str
    archived: bool  # all its evidence had left the window when it was asked
    any_rank: int | None
    all_rank: int | None
    flat_any_rank: int | None
    flat_all_rank: int | None
    answered: bool  # recall gave results (not "no match")


def speaker_text(message: ChatMessage) -> str:
    """A message as the flat baseline indexes it (the service writes the name the same way)."""
    return f"{message.speaker}: {message.text}"


def _turns(chat: LongChat) -> list[list[Message]]:
    """A turn per message of the first friend, the second friend's before it included."""
    turns: list[list[Message]] = [[]]
    for said in chat.messages:
        turns[-1].append(Message.of(said.role, said.text, name=said.speaker, created_at=said.at))
        if said.role == "user":
            turns.append([])
    return [turn for turn in turns if turn]


def evidence_ranks(
    question: ChatQuestion, texts: Sequence[str], said: dict[str, str]
) -> tuple[int | None, int | None]:
    """(the first rank holding some evidence, the rank by which all of it is held)."""
    wanted = {said[i] for i in question.evidence}
    seen: set[str] = set()
    first = None
    for rank, text in enumerate(texts[:RECALL_DEPTH], start=1):
        seen |= {message for message in wanted if message in text}
        if seen and first is None:
            first = rank
        if seen == wanted:
            return first, rank
    return first, None


async def _ingest(ctx: ServiceContext, session: str, chat: LongChat, window: int) -> TurnResult:
    last = None
    for turn in _turns(chat):
        last = await post(ctx, session, turn, context_window=window, recall="off")
    assert last is not None
    return last


async def run_chat(
    ctx: ServiceContext, chat: LongChat, window: int, seen: ChatRecallSeen = lambda *_: None
) -> list[ChatOutcome]:
    session = f"chats-{chat.id}-{uuid.uuid4().hex[:6]}"
    last = await _ingest(ctx, session, chat, window)
    in_window = "\n".join(str(m.get("content") or "") for m in last.messages)
    said = {m.id: m.text for m in chat.messages}
    flat = await FlatIndex.build(ctx.embedder, [speaker_text(m) for m in chat.messages])
    outcomes = []
    for question in chat.questions:
        result = await recall_top(ctx, session, question.text, chat.asked_at)
        ranked = [r.text for r in result.results]  # best first
        any_rank, all_rank = evidence_ranks(question, ranked, said)
        flat_ranked = await flat.ranked(ctx.embedder, question.text)
        flat_any, flat_all = evidence_ranks(question, flat_ranked, said)
        archived = not any(said[i] in in_window for i in question.evidence)
        if archived:
            seen(question, chat.language, result, [said[i] for i in question.evidence])
        outcomes.append(
            ChatOutcome(
                question=question,
                language=chat.language,
                archived=archived,
                any_rank=any_rank,
                all_rank=all_rank,
                flat_any_rank=flat_any,
                flat_all_rank=flat_all,
                answered=bool(result.results),
            )
        )
    return outcomes


async def run_chats(
    ctx: ServiceContext,
    config: ChatsConfig,
    progress: Progress = lambda _: None,
    seen: ChatRecallSeen = lambda *_: None,
) -> list[ChatOutcome]:
    outcomes: list[ChatOutcome] = []
    for chat in all_chats(config.seed):
        if config.chats and chat.id not in config.chats:
            continue
        outcomes += await run_chat(ctx, chat, config.window, seen)
        progress(1)
    return outcomes


@dataclass(frozen=True)
class ChatsRow:
    """One group of questions: Ebbtide's R@5 / R@10 (any, all evidence), the flat baseline's."""

    group: str
    questions: int
    archived: int
    any_at_5: float | None
    all_at_5: float | None
    any_at_10: float | None
    all_at_10: float | None
    flat_any_at_5: float | None
    flat_all_at_5: float | None
    flat_any_at_10: float | None
    flat_all_at_10: float | None
    answered: float | None


def chats_row(group: str, outcomes: Sequence[ChatOutcome]) -> ChatsRow:
    archived = [o for o in outcomes if o.archived]
    return ChatsRow(
        group=group,
        questions=len(outcomes),
        archived=len(archived),
        any_at_5=share_within([o.any_rank for o in archived], 5),
        all_at_5=share_within([o.all_rank for o in archived], 5),
        any_at_10=share_within([o.any_rank for o in archived], 10),
        all_at_10=share_within([o.all_rank for o in archived], 10),
        flat_any_at_5=share_within([o.flat_any_rank for o in archived], 5),
        flat_all_at_5=share_within([o.flat_all_rank for o in archived], 5),
        flat_any_at_10=share_within([o.flat_any_rank for o in archived], 10),
        flat_all_at_10=share_within([o.flat_all_rank for o in archived], 10),
        answered=share_of([o.answered for o in archived]),
    )


def _groups(outcome: ChatOutcome) -> tuple[str, ...]:
    question = outcome.question
    words = "shared words" if question.overlap else "other words"
    return (
        "all",
        outcome.language,
        f"{outcome.language} {question.kind}",
        f"{outcome.language} {words}",
        question.split,
    )


CHATS_GROUPS = (
    "all",
    *LANGUAGES,
    *(f"{language} {kind}" for language in LANGUAGES for kind in QUESTION_KINDS),
    *(f"{language} {words}" for language in LANGUAGES for words in ("shared words", "other words")),
    "dev",
    "test",
)


def chats_rows(outcomes: Sequence[ChatOutcome]) -> list[ChatsRow]:
    """Every question, by language, by language and kind, by shared words, by split."""
    return [chats_row(name, [o for o in outcomes if name in _groups(o)]) for name in CHATS_GROUPS]


def chats_markdown(window: int, table: Sequence[ChatsRow]) -> str:
    def cell(value: float | None) -> str:
        return "–" if value is None else f"{value:.2f}"

    lines = [
        f"Long chats, window {window:,} tokens: R@k over the questions whose evidence was archived "
        "(any / all evidence), Ebbtide's `POST /recall` and the flat BM25 + dense RRF baseline.",
        "",
        "| group | n | archived | R@5 any / all | R@10 any / all | flat R@5 any / all "
        "| flat R@10 any / all | answered |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in table:
        lines.append(
            f"| {r.group} | {r.questions} | {r.archived} "
            f"| {cell(r.any_at_5)} / {cell(r.all_at_5)} "
            f"| {cell(r.any_at_10)} / {cell(r.all_at_10)} "
            f"| {cell(r.flat_any_at_5)} / {cell(r.flat_all_at_5)} "
            f"| {cell(r.flat_any_at_10)} / {cell(r.flat_all_at_10)} | {cell(r.answered)} |"
        )
    return "\n".join(lines)
