"""Yield points in the long loops (app/core/pace.py) and how a large call steps aside at
them for the calls in progress."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

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
from app.services.throttle import LoopStepAside, StepAside, Traffic


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

    def __call__(self) -> float:
        return self.now


class RecordingTraffic(Traffic):
    """The real counts; each wait is recorded and returns at once (as at its timeout)."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait_quiet(self, timeout_s: float) -> bool:
        self.waits.append(timeout_s)
        return not self.busy

    async def quiet(self, timeout_s: float) -> bool:
        return self.wait_quiet(timeout_s)


def test_traffic_is_every_request_in_progress_but_the_large_calls() -> None:
    traffic = Traffic()
    assert not traffic.busy
    traffic.enter()  # a large call's own request...
    traffic.set_aside()  # ...set aside once it holds its place
    assert not traffic.busy
    traffic.enter()  # someone else's
    assert traffic.busy
    assert not traffic.wait_quiet(0.001)
    traffic.leave()
    assert not traffic.busy
    assert traffic.wait_quiet(0.0)
    traffic.rejoin()
    traffic.leave()
    assert not traffic.busy


def test_a_worker_step_waits_for_others_only_after_its_least_run_of_work() -> None:
    clock, traffic = FakeClock(), RecordingTraffic()
    step = StepAside(traffic, run_s=0.002, wait_s=0.025, clock=clock)
    clock.now += 1.0
    step()  # nobody else in progress: it works on, however long
    assert traffic.waits == []
    traffic.enter()
    step()  # someone came: waited for at once
    assert traffic.waits == [0.025]
    clock.now += 0.0015
    step()  # under the least run since the wait
    assert traffic.waits == [0.025]
    clock.now += 0.001
    step()
    assert traffic.waits == [0.025, 0.025]
    traffic.leave()
    clock.now += 1.0
    step()
    assert traffic.waits == [0.025, 0.025]


async def test_a_worker_step_resumes_as_soon_as_the_others_end() -> None:
    traffic = Traffic()
    traffic.enter()
    step = StepAside(traffic, run_s=0.002, wait_s=30.0)
    waiting = asyncio.get_running_loop().run_in_executor(None, step)
    await asyncio.sleep(0.05)
    assert not waiting.done()  # the request is still in progress
    traffic.leave()
    await asyncio.wait_for(waiting, timeout=10)  # long before the 30 s it might wait


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


async def test_the_loops_steps_wait_before_they_start_while_others_are_in() -> None:
    traffic = RecordingTraffic()
    steps = LoopStepAside(traffic, wait_s=0.025)
    async with steps.step():
        pass  # nobody else in progress: no wait
    assert traffic.waits == []
    traffic.enter()
    async with steps.step():
        assert traffic.waits == [0.025]  # someone came: waited for before the statement
    async with steps.step():
        pass
    assert traffic.waits == [0.025, 0.025]
    traffic.leave()
    async with steps.step():
        pass
    assert traffic.waits == [0.025, 0.025]


async def test_under_a_steady_load_the_loops_steps_go_on_one_at_a_time() -> None:
    traffic = RecordingTraffic()  # its waits end at once, as at their timeout
    traffic.enter()
    steps = LoopStepAside(traffic, wait_s=0.025)
    started = 0
    for _ in range(3):
        async with steps.step():
            started += 1
    assert (started, len(traffic.waits)) == (3, 3)


async def test_the_loop_waits_for_the_others_while_serving_them() -> None:
    traffic = Traffic()
    traffic.enter()
    waiting = asyncio.create_task(traffic.quiet(30.0))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    traffic.leave()
    assert await asyncio.wait_for(waiting, timeout=10)
    traffic.enter()
    assert not await traffic.quiet(0.01)  # at most its timeout
    traffic.leave()
