"""Yield points in the long loops (app/core/pace.py) and the worker's duty cycle."""

from __future__ import annotations

import pytest

from app.core.facts import SourceMessage, extract
from app.core.lexical import lexical_terms
from app.core.pace import (
    current_loop_pacer,
    current_pacer,
    loop_paced_by,
    pace,
    pace_loop,
    paced_by,
)
from app.services.throttle import DutyCycle


class Calls:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def test_pace_calls_the_pacer_only_inside_its_block() -> None:
    calls = Calls()
    pace()  # no pacer: nothing happens
    with paced_by(calls):
        assert current_pacer() is calls
        pace()
        pace()
    pace()
    assert calls.count == 2
    assert current_pacer() is None


def test_an_inner_pacer_gives_way_to_the_outer_one_after_its_block() -> None:
    outer, inner = Calls(), Calls()
    with paced_by(outer):
        with paced_by(inner):
            pace()
        pace()
    assert (outer.count, inner.count) == (1, 1)


def test_fact_extraction_paces_at_every_message() -> None:
    messages = [
        SourceMessage(seq=i, turn=i, role="user", text=f"Budget is {i} euros. Ship by Friday.")
        for i in range(50)
    ]
    calls = Calls()
    with paced_by(calls):
        extract(messages, [])
    assert calls.count >= len(messages)


def test_tokenizing_paces_once_per_text() -> None:
    calls = Calls()
    with paced_by(calls):
        for text in ("one text", "another text", "a third"):
            lexical_terms(text)
    assert calls.count == 3


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_the_duty_cycle_rests_after_each_run_of_work_and_not_before() -> None:
    clock = FakeClock()
    cycle = DutyCycle(run_s=0.002, rest_s=0.001, clock=clock, sleep=clock.sleep)
    clock.now += 0.0015
    cycle()  # 1.5 ms of work: no rest yet
    assert clock.slept == []
    clock.now += 0.001
    cycle()  # 2.5 ms: rests half as long as it worked; the next run starts after the rest
    assert clock.slept == [0.00125]
    clock.now += 0.0019
    cycle()
    assert clock.slept == [0.00125]
    clock.now += 0.0001
    cycle()
    assert clock.slept == pytest.approx([0.00125, 0.001])


async def test_a_loop_pacer_is_awaited_only_inside_its_block() -> None:
    awaited = []

    async def pacer() -> None:
        awaited.append(True)

    await pace_loop()
    with loop_paced_by(pacer):
        assert current_loop_pacer() is pacer
        await pace_loop()
    await pace_loop()
    assert awaited == [True]
    assert current_loop_pacer() is None
