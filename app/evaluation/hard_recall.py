"""Recall measured on the hard set (docs/RECALL.md): what `POST /recall` returns, what the
turn puts in the prompt, and the embedder's own ceiling with no service around it.

Per pressure (conversation tokens ÷ window), each of the four conversations is posted turn
by turn through the real pipeline; then
- every question and every twin goes to the recall use case (the body of `POST /recall`),
  top 10 within the largest budget: the rank at which all of a needle's answers are in the
  results (best score first), and whether the twin was told "no match";
- every question and twin is posted as a turn (auto mode), in shuffled order, each answered
  by a neutral assistant line: needle-in-prompt (all answers somewhere in the prompt before
  the question) and false injection (a twin got recalled items injected).
Two references with no service around them: the embedder's ceiling (every posted message
embedded as a unit, every question scored against all of them, Recall@5 over units) and the
flat hybrid baseline of `app/evaluation/flat.py` (BM25 + dense, RRF, 4-message chunks), its
R@5 and R@10 over chunks beside the service's.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from app.core.injection import POINTERS_HEADER
from app.core.messages import Message
from app.core.ports import Embedder
from app.core.results import RecallResult, TurnResult
from app.core.vectors import cosine
from app.evaluation.flat import FlatIndex
from app.evaluation.hard_set import (
    ASSISTANT_REPLY_TO_QUESTION,
    KINDS,
    LANGUAGES,
    Conversation,
    HardNeedle,
    PlannedMessage,
    conversations,
)
from app.evaluation.prefix import PrefixReport, PrefixTracker
from app.evaluation.scenarios import post
from app.services.context import ServiceContext
from app.services.recall import recall_query
from app.store.models import DEFAULT_TENANT

RECALL_DEPTH = 10
Progress = Callable[[int], None]
# Hears every question's (`twin` False) and twin's recall results, as asked (the calibration).
HardRecallSeen = Callable[[HardNeedle, bool, RecallResult], None]


@dataclass(frozen=True)
class HardConfig:
    window: int = 8000
    pressures: tuple[float, ...] = (1, 3, 10)
    seed: int = 7
    # False: history posted without times, as an import or a client that sends none would:
    # every message carries the moment it was posted, so no day a question names was seen.
    timed: bool = True

    @classmethod
    def quick(cls) -> HardConfig:
        return cls(window=3000, pressures=(3,))


@dataclass(frozen=True)
class QuestionOutcome:
    """One needle at one pressure. `rank`: where its answers are complete in the recall
    results (None: not in the top 10); `archived`: its fact had left the window, so recall
    could return it."""

    needle: HardNeedle
    pressure: float
    archived: bool
    rank: int | None
    answered: bool  # the question got results (not "no match")
    confidence: float | None
    twin_answered: bool  # the twin got results
    twin_confidence: float | None
    in_prompt: bool  # as evidence: the answers in the prompt, pointer lines left out
    twin_injected: bool
    references_measured: bool = False
    # The question's turn named a chunk holding the answers in a one-line pointer (judged by
    # the recall results' texts: a pointer to a chunk past the top 10 does not count), and the
    # twin's turn gave pointers at all; the tokens of the question turn's block, and of its
    # pointer lines.
    pointed: bool = False
    twin_pointed: bool = False
    block_tokens: int = 0
    pointer_tokens: int = 0
    ceiling_rank: int | None = None  # the embedder alone (None: below 10, or not measured)
    flat_rank: int | None = None  # the flat hybrid baseline (None: below 10, or not measured)


@dataclass
class PressureRun:
    pressure: float
    tokens: list[int]
    outcomes: list[QuestionOutcome] = field(default_factory=list)
    search_ms: list[float] = field(default_factory=list)
    steady_prefix: list[float] = field(default_factory=list)  # stable-prefix shares
    offload_prefix: list[float] = field(default_factory=list)
    steady_extending: list[bool] = field(default_factory=list)

    def prefix(self) -> PrefixReport:
        """Stable-prefix shares over every turn of every conversation (evaluation/prefix.py)."""
        tracker = PrefixTracker(
            len,
            steady=self.steady_prefix,
            offload=self.offload_prefix,
            steady_extending=self.steady_extending,
        )
        return tracker.report()


def to_message(planned: PlannedMessage, *, timed: bool = True) -> Message:
    at = planned.created_at if timed else None
    return Message.of(planned.role, planned.content, name=planned.name, created_at=at)


def covered_at(answers: Sequence[str], texts: Sequence[str]) -> int | None:
    """The smallest k such that the first k texts hold every answer."""
    seen = ""
    for rank, text in enumerate(texts, start=1):
        seen += "\n" + text
        if all(answer in seen for answer in answers):
            return rank
    return None


def _ranked_texts(result: RecallResult) -> list[str]:
    return [r.text for r in result.results]  # best first


def _top_confidence(result: RecallResult) -> float | None:
    return max((r.confidence for r in result.results), default=None)


async def _ingest(
    ctx: ServiceContext,
    session: str,
    chat: Conversation,
    window: int,
    prefix: PrefixTracker,
    timed: bool,
) -> TurnResult:
    last: TurnResult | None = None
    for messages in chat.turns:
        posted = [to_message(m, timed=timed) for m in messages]
        last = await post(ctx, session, posted, context_window=window)
        prefix.record(last.messages, offloaded=last.offload.triggered)
    assert last is not None
    return last


def _in_window(last: TurnResult, needle: HardNeedle) -> bool:
    window_text = "\n".join(
        str(m.get("content") or "") for m in last.messages if m["role"] in ("user", "assistant")
    )
    return needle.fact[0] in window_text


async def recall_top(
    ctx: ServiceContext, session: str, text: str, asked_at: datetime
) -> RecallResult:
    """The body of `POST /recall`: top 10 within the largest budget, as asked at `asked_at`."""
    budget = ctx.settings.limits.max_recall_budget_tokens
    return await recall_query(
        ctx, DEFAULT_TENANT, session, text, RECALL_DEPTH, budget_tokens=budget, asked_at=asked_at
    )


def _prompt_before_question(result: TurnResult) -> str:
    """What the prompt shows before the question, pointer lines left out (they name a chunk,
    a gist of it is no evidence)."""
    texts = [str(m.get("content") or "").split(POINTERS_HEADER)[0] for m in result.messages[:-1]]
    return "\n".join(texts)


def _points_at_answer(turn: TurnResult, found: RecallResult, answer: Sequence[str]) -> bool:
    holding = {r.chunk_id for r in found.results if all(a in r.text for a in answer)}
    return any(p.chunk_id in holding for p in turn.recall.pointers)


async def _ask_turns(
    ctx: ServiceContext,
    session: str,
    chat: Conversation,
    window: int,
    seed: int,
    prefix: PrefixTracker,
    timed: bool,
) -> dict[tuple[str, bool], TurnResult]:
    """Every question and twin as a turn, shuffled by the seed and the conversation (not the
    session's random suffix: one order per seed, so a run repeats its figures); (needle id,
    is twin) → the turn's result."""
    asks = [(n, twin) for n in chat.needles for twin in (False, True)]
    random.Random(f"{seed}-{chat.session}").shuffle(asks)
    results = {}
    reply: Message | None = None
    for index, (needle, twin) in enumerate(asks):
        at = chat.asked_at + timedelta(minutes=index)
        text = needle.twin if twin else needle.question
        question = to_message(PlannedMessage("user", text, at), timed=timed)
        messages = [reply, question] if reply is not None else [question]
        result = await post(ctx, session, messages, context_window=window)
        prefix.record(result.messages, offloaded=result.offload.triggered)
        results[(needle.id, twin)] = result
        reply = Message.of("assistant", ASSISTANT_REPLY_TO_QUESTION[chat.language])
    return results


async def run_conversation(
    ctx: ServiceContext,
    chat: Conversation,
    pressure: float,
    window: int,
    seed: int,
    prefix: PrefixTracker,
    seen: HardRecallSeen = lambda *_: None,
    timed: bool = True,
) -> tuple[list[QuestionOutcome], list[float]]:
    """The conversation's turns (with their times when `timed`), then a search and a turn per
    question and twin; `prefix` follows every turn's prompt, `seen` hears of every search."""
    session = f"{chat.session}-{pressure:g}x-{uuid.uuid4().hex[:6]}"
    last = await _ingest(ctx, session, chat, window, prefix, timed)
    recalled: dict[tuple[str, bool], RecallResult] = {}
    search_ms = []
    for needle in chat.needles:
        for twin in (False, True):
            text = needle.twin if twin else needle.question
            result = await recall_top(ctx, session, text, chat.asked_at)
            recalled[(needle.id, twin)] = result
            if not _in_window(last, needle):
                seen(needle, twin, result)
            search_ms.append(result.timings_ms.get("search", 0.0))
    turns = await _ask_turns(ctx, session, chat, window, seed, prefix, timed)
    outcomes = []
    for needle in chat.needles:
        asked, twin_asked = recalled[(needle.id, False)], recalled[(needle.id, True)]
        asked_turn, twin_turn = turns[(needle.id, False)], turns[(needle.id, True)]
        outcomes.append(
            QuestionOutcome(
                needle=needle,
                pressure=pressure,
                archived=not _in_window(last, needle),
                rank=covered_at(needle.answer, _ranked_texts(asked)),
                answered=bool(asked.results),
                confidence=_top_confidence(asked),
                twin_answered=bool(twin_asked.results),
                twin_confidence=_top_confidence(twin_asked),
                in_prompt=all(a in _prompt_before_question(asked_turn) for a in needle.answer),
                twin_injected=bool(twin_turn.recall.hits),  # this turn's block, not held ones
                pointed=_points_at_answer(asked_turn, asked, needle.answer),
                twin_pointed=bool(twin_turn.recall.pointers),
                block_tokens=asked_turn.recall.injected_tokens,
                pointer_tokens=asked_turn.recall.pointer_tokens,
            )
        )
    return outcomes, search_ms


def _unit_text(message: PlannedMessage) -> str:
    return f"{message.name}: {message.content}" if message.name else message.content


def _posted_texts(chat: Conversation) -> list[str]:
    return [_unit_text(m) for messages in chat.turns for m in messages]


async def ceiling_ranks(embedder: Embedder, chat: Conversation) -> dict[str, int | None]:
    """Needle id → the rank of the first unit (posted message) holding every answer, every
    message scored against the question by the embedder alone (None: below 10)."""
    units = _posted_texts(chat)
    vectors = await embedder.embed_passages(units)
    ranks: dict[str, int | None] = {}
    for needle in chat.needles:
        query = await embedder.embed_query(needle.question)
        order = sorted(range(len(units)), key=lambda i: -cosine(query, vectors[i]))
        best = [units[i] for i in order[:RECALL_DEPTH]]
        ranks[needle.id] = next(
            (k for k, text in enumerate(best, 1) if all(a in text for a in needle.answer)), None
        )
    return ranks


async def flat_ranks(embedder: Embedder, chat: Conversation) -> dict[str, int | None]:
    """Needle id → the rank at which the flat baseline's chunks hold every answer (None:
    not in its top 10)."""
    index = await FlatIndex.build(embedder, _posted_texts(chat))
    ranks: dict[str, int | None] = {}
    for needle in chat.needles:
        ranked = await index.ranked(embedder, needle.question)
        ranks[needle.id] = covered_at(needle.answer, ranked[:RECALL_DEPTH])
    return ranks


async def run_pressure(
    ctx: ServiceContext,
    config: HardConfig,
    pressure: float,
    *,
    with_references: bool,
    progress: Progress = lambda _: None,
    seen: HardRecallSeen = lambda *_: None,
) -> PressureRun:
    chats = conversations(
        window=config.window, pressure=pressure, count=ctx.counter.count, seed=config.seed
    )
    run = PressureRun(pressure=pressure, tokens=[c.tokens for c in chats])
    for chat in chats:
        prefix = PrefixTracker(ctx.counter.count)
        outcomes, search_ms = await run_conversation(
            ctx, chat, pressure, config.window, config.seed, prefix, seen, config.timed
        )
        run.steady_prefix += prefix.steady
        run.offload_prefix += prefix.offload
        run.steady_extending += prefix.steady_extending
        if with_references:
            ceiling = await ceiling_ranks(ctx.embedder, chat)
            flat = await flat_ranks(ctx.embedder, chat)
            outcomes = [
                replace(
                    o,
                    references_measured=True,
                    ceiling_rank=ceiling[o.needle.id],
                    flat_rank=flat[o.needle.id],
                )
                for o in outcomes
            ]
        run.outcomes += outcomes
        run.search_ms += search_ms
        progress(1)
    return run


@dataclass(frozen=True)
class HardRow:
    """The figures of one group of needles (a language, a kind, a split) at one pressure."""

    group: str
    needles: int
    archived: int
    recall_at_1: float | None
    recall_at_5: float | None
    recall_at_10: float | None
    ceiling_at_5: float | None
    flat_at_5: float | None  # the flat hybrid baseline on the same messages
    flat_at_10: float | None
    answered: float  # questions that got results at all
    twin_no_match: float  # twins told "no match" by recall
    in_prompt: float  # as evidence
    false_injection: float  # twins that got recalled items injected by the turn
    pointed: float = 0.0  # not in the prompt, but a pointer names a chunk holding it
    false_pointer: float = 0.0  # twins given pointers
    block_tokens: float = 0.0  # the question turns' blocks, on average (pointers included)
    pointer_tokens: float = 0.0

    @property
    def evidence_or_pointer(self) -> float:
        return round(self.in_prompt + self.pointed, 3)


def share_of(values: Sequence[bool]) -> float | None:
    """The share of true values, to three places (None: no values)."""
    return round(sum(values) / len(values), 3) if values else None


def _at(outcomes: Sequence[QuestionOutcome], k: int) -> float | None:
    return share_of([o.rank is not None and o.rank <= k for o in outcomes if o.archived])


def share_within(ranks: Sequence[int | None], k: int) -> float | None:
    """The share of ranks within the top k (None: not found)."""
    return share_of([rank is not None and rank <= k for rank in ranks])


def row(group: str, outcomes: Sequence[QuestionOutcome]) -> HardRow:
    measured = [o for o in outcomes if o.references_measured]
    flat = [o.flat_rank for o in measured if o.archived]  # the needles R@k counts
    return HardRow(
        group=group,
        needles=len(outcomes),
        archived=sum(o.archived for o in outcomes),
        recall_at_1=_at(outcomes, 1),
        recall_at_5=_at(outcomes, 5),
        recall_at_10=_at(outcomes, 10),
        ceiling_at_5=share_within([o.ceiling_rank for o in measured], 5),
        flat_at_5=share_within(flat, 5),
        flat_at_10=share_within(flat, 10),
        answered=share_of([o.answered for o in outcomes]) or 0.0,
        twin_no_match=share_of([not o.twin_answered for o in outcomes]) or 0.0,
        in_prompt=share_of([o.in_prompt for o in outcomes]) or 0.0,
        false_injection=share_of([o.twin_injected for o in outcomes]) or 0.0,
        pointed=share_of([o.pointed and not o.in_prompt for o in outcomes]) or 0.0,
        false_pointer=share_of([o.twin_pointed for o in outcomes]) or 0.0,
        block_tokens=_mean([o.block_tokens for o in outcomes]),
        pointer_tokens=_mean([o.pointer_tokens for o in outcomes]),
    )


def _mean(values: Sequence[int]) -> float:
    return round(sum(values) / len(values), 1) if values else 0.0


def _group(outcome: QuestionOutcome) -> tuple[str, ...]:
    """The groups a needle counts in."""
    needle = outcome.needle
    return ("all", needle.language, f"{needle.language} {needle.kind}", needle.split_name)


GROUPS = (
    "all",
    *LANGUAGES,
    *(f"{language} {kind}" for language in LANGUAGES for kind in KINDS),
    "dev",
    "test",
)


def rows(outcomes: Sequence[QuestionOutcome]) -> list[HardRow]:
    """All needles, then by language, by language and kind, and by split."""
    return [row(name, [o for o in outcomes if name in _group(o)]) for name in GROUPS]


def markdown(pressure: float, table: Sequence[HardRow]) -> str:
    def cell(value: float | None) -> str:
        return "–" if value is None else f"{value:.2f}"

    lines = [
        f"pressure {pressure:g}×",
        "",
        "| group | n | archived | R@1 | R@5 | R@10 | flat R@5 | flat R@10 | ceiling R@5 "
        "| answered | twin no-match | in prompt | + pointer | false injection | false pointer "
        "| block tokens | pointer tokens |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
        "| --- | --- | --- |",
    ]
    for r in table:
        lines.append(
            f"| {r.group} | {r.needles} | {r.archived} | {cell(r.recall_at_1)} "
            f"| {cell(r.recall_at_5)} | {cell(r.recall_at_10)} | {cell(r.flat_at_5)} "
            f"| {cell(r.flat_at_10)} | {cell(r.ceiling_at_5)} "
            f"| {cell(r.answered)} | {cell(r.twin_no_match)} | {cell(r.in_prompt)} "
            f"| {cell(r.evidence_or_pointer)} | {cell(r.false_injection)} "
            f"| {cell(r.false_pointer)} | {r.block_tokens:.0f} | {r.pointer_tokens:.0f} |"
        )
    return "\n".join(lines)
