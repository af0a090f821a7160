"""Yield points in the long loops (app/core/pace.py) and the worker's duty cycle."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from app.core.facts import SourceMessage, extract
from app.core.lexical import lexical_terms
from app.core.pace import (
    current_loop_pacer,
    current_pacer,
    loop_paced_by,
    loop_step,
    pace,
    paced_by,
)
from app.services.throttle import DutyCycle, LoopDutyCycle


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


class CountingLoopPacer:
    def __init__(self) -> None:
        self.steps = 0

    @asynccontextmanager
    async def step(self) -> AsyncIterator[None]:
        yield
        self.steps += 1


async def test_a_loop_pacer_steps_only_inside_its_block() -> None:
    pacer = CountingLoopPacer()
    async with loop_step():
        pass
    with loop_paced_by(pacer):
        assert current_loop_pacer() is pacer
        async with loop_step():
            pass
    async with loop_step():
        pass
    assert pacer.steps == 1
    assert current_loop_pacer() is None


async def test_the_loop_duty_cycle_counts_only_its_steps_and_rests_in_proportion() -> None:
    clock = FakeClock()
    rested: list[float] = []

    async def sleep(seconds: float) -> None:
        rested.append(seconds)

    cycle = LoopDutyCycle(run_s=0.004, rest_s=0.002, clock=clock, sleep=sleep)
    async with cycle.step():
        clock.now += 0.003
    assert rested == []
    clock.now += 5.0  # the loop serving others between two steps: not this call's work
    async with cycle.step():
        clock.now += 0.005  # 8 ms of steps: a rest of half that
    assert rested == pytest.approx([0.004])
    async with cycle.step():
        clock.now += 0.001
    assert rested == pytest.approx([0.004])  # counted afresh after the rest
