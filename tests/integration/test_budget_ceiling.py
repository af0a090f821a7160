"""The budget is a ceiling (docs/DESIGN.md §2), checked on random conversations: windows from
1,000 to 200,000 tokens, chat turns, tool calls with their results, oversize messages,
questions that recall, and the provider's reported prompt size moving the calibration.

On every turn: the prompt never passes C − r (`usage.budget`), held blocks and recalled text
included; the turn's recalled block never passes R (`usage.recall_share_tokens`); an offload
lands at or below the target, the notes it rendered included, unless only the current turn
is left; outside the emergency line no two offloads are closer than the cooldown. A turn that
cannot fit even stubbed is refused with 413 and writes nothing."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.errors import TurnExceedsBudget
from app.core.formats import SystemPrompt
from app.core.messages import Message
from app.core.plan import TurnInput
from app.core.results import TurnResult
from app.core.types import session_key
from app.services.context import ServiceContext
from app.services.turns import run_turn
from app.store.models import DEFAULT_TENANT
from tests.builders import assistant, tool, user

VOCABULARY = (
    "deploy queue shard region invoice customer review branch schema index latency window "
    "archive vector worker release rollback migration alert metric tenant backup replica"
).split()
CITIES = ("Suzhou", "Ningbo", "Harbin", "Xiamen", "Kunming", "Lhasa")
TARGET_RATIO, EMERGENCY_RATIO, COOLDOWN = 0.65, 0.95, 2  # the settings' defaults


def filler(tokens: int, seed: int) -> str:
    """About `tokens` tokens of words, a new line every dozen."""
    words = [VOCABULARY[(seed * 7 + i * 3) % len(VOCABULARY)] for i in range(max(1, tokens))]
    return "\n".join(" ".join(words[i : i + 12]) for i in range(0, len(words), 12))


@dataclass(frozen=True)
class PlannedTurn:
    kind: str  # chat, tools, oversize or question
    sizes: tuple[int, ...]  # tokens of each message's filler
    recall: str
    observed_factor: float | None  # the provider's count of the last prompt / Ebbtide's


@st.composite
def conversations(draw: st.DrawFn) -> tuple[int, list[PlannedTurn]]:
    window = int(10 ** draw(st.floats(math.log10(1_000), math.log10(200_000))))
    count = draw(st.integers(6, 14))
    mean = max(8, int(1.6 * window / count / 2))  # about 1.6 windows of text in all
    size = st.integers(max(4, mean // 5), mean * 2)
    turns = []
    for _ in range(count):
        kind = draw(st.sampled_from(("chat", "chat", "tools", "oversize", "question")))
        if kind == "tools":
            sizes = tuple(draw(st.lists(size, min_size=1, max_size=3)))
        elif kind == "oversize":
            sizes = (draw(st.integers(min(window, 5_000) // 3, min(window, 6_000) * 2)),)
        else:
            sizes = (draw(size), draw(size))
        recall = draw(st.sampled_from(("auto", "auto", "force", "off")))
        factor = draw(st.one_of(st.none(), st.floats(0.6, 1.6)))
        turns.append(PlannedTurn(kind, sizes, recall, factor))
    return window, turns


def messages_of(planned: PlannedTurn, number: int) -> list[Message]:
    city = CITIES[number % len(CITIES)]
    if planned.kind == "tools":
        calls = [(f"call-{number}-{i}", "search") for i in range(len(planned.sizes))]
        results = [
            tool(call_id, f"ticket T-{number} result: " + filler(tokens, number + i))
            for i, ((call_id, _), tokens) in enumerate(zip(calls, planned.sizes, strict=True))
        ]
        return [assistant(calls=calls), *results]
    if planned.kind == "oversize":
        return [user(f"Log of ticket T-{number}:\n" + filler(planned.sizes[0], number))]
    reply, asked = planned.sizes
    if planned.kind == "question":
        earlier = max(0, number - 3)
        question = f"Which warehouse did we pick for ticket T-{earlier}, as I said before?"
        return [assistant(filler(reply, number)), user(question + " " + filler(asked, number))]
    said = f"Ticket T-{number} ships only from the {city} warehouse. "
    return [assistant(filler(reply, number)), user(said + filler(asked, number))]


async def window_turns_before(connection: AsyncConnection, session: str, turn: int) -> int:
    """Messages of earlier turns still in the window."""
    found = await connection.scalar(
        text(
            "SELECT count(*) FROM messages WHERE session_id = :key AND state = 'window' "
            "AND turn < :turn"
        ),
        {"key": session_key(DEFAULT_TENANT, session), "turn": turn},
    )
    return int(found or 0)


async def session_version(connection: AsyncConnection, session: str) -> int | None:
    return await connection.scalar(
        text("SELECT version FROM sessions WHERE id = :key"),
        {"key": session_key(DEFAULT_TENANT, session)},
    )


class Tracker:
    """What the checks need from the turns before."""

    def __init__(self) -> None:
        self.last: TurnResult | None = None
        self.last_offload_turn: int | None = None

    def observed(self, planned: PlannedTurn) -> int | None:
        if self.last is None or planned.observed_factor is None:
            return None
        return max(1, round(self.last.usage.prompt_tokens * planned.observed_factor))


async def check_turn(
    connection: AsyncConnection, session: str, result: TurnResult, tracker: Tracker
) -> None:
    usage, recall = result.usage, result.recall
    assert usage.prompt_tokens <= usage.budget, f"turn {result.turn}: {usage}"
    injected = recall.injected_tokens * usage.calibration_ratio
    assert injected <= usage.recall_share_tokens, f"turn {result.turn}: {recall}"
    if not result.offload.triggered:
        return
    landed = usage.watermark * usage.watermark_base  # with the notes the offload rendered
    target = int(TARGET_RATIO * usage.watermark_base)
    if landed > target + 1 + 5e-5 * usage.watermark_base:  # the watermark has 4 decimals
        assert await window_turns_before(connection, session, result.turn) == 0, usage
    if usage.level != "emergency" and tracker.last_offload_turn is not None:
        assert result.turn - tracker.last_offload_turn > COOLDOWN, result.offload
    tracker.last_offload_turn = result.turn


# Examples are drawn afresh each run (the database of one test is shared: each example has a
# session of its own); a failure prints the conversation that broke the ceiling.
@given(conversation=conversations())
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
async def test_no_prompt_passes_the_budget_and_recall_stays_in_its_share(
    ctx: ServiceContext, connection: AsyncConnection, conversation: tuple[int, list[PlannedTurn]]
) -> None:
    window, planned_turns = conversation
    session = f"ceiling-{ctx.new_id()}"
    tracker = Tracker()
    for number, planned in enumerate(planned_turns):
        inp = TurnInput(
            session_id=session,
            tenant_id=DEFAULT_TENANT,
            messages=messages_of(planned, number),
            context_window=window,
            recall=planned.recall,  # type: ignore[arg-type]
            observed_prompt_tokens=tracker.observed(planned),
            system=SystemPrompt("You are a logistics assistant.") if number == 0 else None,
        )
        version = await session_version(connection, session)
        try:
            result = await run_turn(ctx, inp)
        except TurnExceedsBudget as refused:
            assert refused.details["needed_tokens"] > refused.details["budget"]
            assert await session_version(connection, session) == version, "a refusal wrote"
            event("refused")
            continue
        await check_turn(connection, session, result, tracker)
        # What the examples reached (pytest --hypothesis-show-statistics)
        usage, recall = result.usage, result.recall
        event(f"offload {result.offload.triggered}, level {usage.level}")
        event(f"recall injected {recall.injected_tokens > 0}, held {recall.held_tokens > 0}")
        event(f"near the budget {usage.prompt_tokens > 0.9 * usage.budget}")
        tracker.last = result
