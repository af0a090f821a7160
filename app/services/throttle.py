"""What one tenant may ask of this process, so that no caller stalls the others
(docs/RELIABILITY.md, "One caller against the rest").

- Rates, per tenant and minute: turns, proxy calls, and the bytes of both (the `limits`
  library's sliding-window counters, in memory: each replica counts its own calls). A call
  over one is refused before anything is read or written: 429 with Retry-After.
- Large calls (a body of at least `large_body_bytes`: a whole history posted at once): a
  tenant has at most `large_calls_per_tenant` in progress, the next few wait in line holding
  only their bytes, and one past the line is refused. While it is in progress, a large call's
  CPU-heavy steps (parsing, reconciling, digesting, planning, chunking, extracting facts) run
  on a small thread pool (`run`) instead of the event loop.
- A large call steps aside for everyone else (`Traffic`, `StepAside`, `LoopStepAside`): at
  each `pace()` of its worker thread and before each statement of its rows on the loop, while
  other calls are in progress it waits for them to end (`step_aside_wait_ms` at most; then
  it does at least `step_aside_run_ms` of work, or one statement, before it waits again).
  Meanwhile the loop holds the interpreter alone and finishes those calls' round trips
  without waiting out a switch interval at each one; with nobody else in progress the large
  call works at full speed.
"""

from __future__ import annotations

import asyncio
import contextvars
import ctypes
import ctypes.util
import functools
import gc
import math
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext, suppress
from enum import StrEnum
from typing import ParamSpec, TypeVar

from limits import RateLimitItem, RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import SlidingWindowCounterRateLimiter

from app import metrics
from app.core.errors import LargeCallsWaiting, RateLimited
from app.core.facts import content_tokens
from app.core.lexical import english_stem, term_set
from app.core.pace import loop_paced_by, paced_by
from app.settings import ThrottleSettings

# Set while a large call is in progress: its heavy steps go to the thread pool.
_in_large_call: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "in_large_call", default=False
)


P = ParamSpec("P")
R = TypeVar("R")


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None elsewhere (musl, macOS): it has no such call."""
    try:
        found: Callable[[int], int] = ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    return found


MALLOC_TRIM = _malloc_trim()


# The memoized functions a large call fills with its own texts: thousands of entries made
# among the call's short-lived objects, each one keeping the allocator's block around it
# (and the pages of that block) from being given back after the call.
CACHES_LARGE_CALLS_FILL = (term_set, english_stem, content_tokens)


def give_back_memory() -> None:
    """Returns what a large call left behind: the caches it filled are emptied, the cycles
    made while the collector was paused are collected, and the heap pages now free go back to
    the system (glibc keeps them for later until asked; malloc_trim runs without the
    interpreter's lock: a ctypes call)."""
    for cache in CACHES_LARGE_CALLS_FILL:
        cache.cache_clear()
    gc.collect()
    if MALLOC_TRIM is not None:
        MALLOC_TRIM(0)


def _lower_priority(nice: int) -> None:
    """This thread's CPU priority `nice` steps below the process's. On Linux a priority is
    a thread's own (its id is a task id); elsewhere the call would renice the whole process,
    so it is left alone."""
    if sys.platform == "linux":
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)


class Traffic:
    """The calls in progress that a large call steps aside for: every HTTP request the
    server is answering (`enter` / `leave`, by the `CountTraffic` middleware) less the large
    calls themselves (`set_aside` / `rejoin`), which would otherwise wait for each other.
    Counted on the event loop; worker threads wait for it through a `threading.Event`."""

    def __init__(self) -> None:
        self._requests = 0
        self._large = 0
        self._quiet = threading.Event()
        self._quiet.set()
        self._loop_waiters: list[asyncio.Future[None]] = []

    @property
    def busy(self) -> bool:
        """Another call than a large one is in progress."""
        return self._requests > self._large

    def enter(self) -> None:
        self._requests += 1
        self._changed()

    def leave(self) -> None:
        self._requests -= 1
        self._changed()

    def set_aside(self) -> None:
        """A large call's own request (in progress or in line) is not traffic to wait for."""
        self._large += 1
        self._changed()

    def rejoin(self) -> None:
        self._large -= 1
        self._changed()

    def _changed(self) -> None:
        if self.busy:
            self._quiet.clear()
            return
        self._quiet.set()
        for waiter in self._loop_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._loop_waiters.clear()

    def wait_quiet(self, timeout_s: float) -> bool:
        """On a worker thread: until no other call is in progress, `timeout_s` at most
        (the interpreter's lock is let go meanwhile). True if it is quiet."""
        return self._quiet.wait(timeout_s)

    async def quiet(self, timeout_s: float) -> bool:
        """On the loop: the same, the loop serving those calls meanwhile."""
        if not self.busy:
            return True
        waiter = asyncio.get_running_loop().create_future()
        self._loop_waiters.append(waiter)
        await asyncio.wait({waiter}, timeout=timeout_s)
        if not waiter.done():
            self._loop_waiters.remove(waiter)
        return not self.busy


class StepAside:
    """A pacer for one step of a large call on a worker thread, at its `pace()` calls: while
    other calls are in progress, once it has worked `run_s` of the thread's own CPU time
    (`time.thread_time`: not its waits for the interpreter's lock, the database or the
    network) since it last waited, it waits for them to end, `wait_s` at most. The run is
    what keeps a large call moving under a steady load; with nobody else in progress it
    never waits."""

    def __init__(
        self,
        traffic: Traffic,
        run_s: float,
        wait_s: float,
        clock: Callable[[], float] = time.thread_time,
    ) -> None:
        self._traffic, self._run_s, self._wait_s, self._clock = traffic, run_s, wait_s, clock
        self._since: float | None = None  # not waited yet: the first call in is waited for

    def __call__(self) -> None:
        if not self._traffic.busy:
            return
        if self._since is not None and self._clock() - self._since < self._run_s:
            return
        self._traffic.wait_quiet(self._wait_s)
        self._since = self._clock()


class LoopStepAside:
    """The same for a large call's own steps on the event loop (`loop_step()`, a statement
    of its rows each): while other calls are in progress, each step waits for them to end
    before it starts, `wait_s` at most, so that under a steady load the steps still go on,
    one a wait. A statement's cost is mostly the database's, which the loop's CPU time does
    not see: one not started is one the others' queries do not share the database with."""

    def __init__(self, traffic: Traffic, wait_s: float) -> None:
        self._traffic, self._wait_s = traffic, wait_s

    @asynccontextmanager
    async def step(self) -> AsyncIterator[None]:
        if self._traffic.busy:
            await self._traffic.quiet(self._wait_s)
        yield


class CallKind(StrEnum):
    TURN = "turn"
    PROXY = "proxy"


class Throttle:
    def __init__(self, settings: ThrottleSettings) -> None:
        self._settings = settings
        self.traffic = Traffic()
        self._limiter = SlidingWindowCounterRateLimiter(MemoryStorage())
        self._rates: dict[str, RateLimitItem] = {
            CallKind.TURN: RateLimitItemPerMinute(settings.turns_per_minute),
            CallKind.PROXY: RateLimitItemPerMinute(settings.proxy_calls_per_minute),
            "bytes": RateLimitItemPerMinute(settings.bytes_per_minute),
        }
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._holders: dict[str, int] = {}  # in progress or waiting, per tenant
        self._in_progress = 0  # large calls of every tenant
        self._collector_was_on = True
        self._pool = ThreadPoolExecutor(
            settings.worker_threads,
            thread_name_prefix="large-call",
            initializer=_lower_priority,
            initargs=(settings.worker_nice,),
        )
        self._give_back_timer: asyncio.TimerHandle | None = None
        # The event loop waits at most this long for the interpreter behind a worker thread.
        sys.setswitchinterval(settings.switch_interval_s)

    def admit(self, tenant: str, kind: CallKind, body_bytes: int) -> None:
        """Counts the call against the tenant's rates, or refuses it (counting nothing)."""
        checks = ((kind.value, self._rates[kind], 1), ("bytes", self._rates["bytes"], body_bytes))
        for name, rate, cost in checks:
            if not self._limiter.test(rate, tenant, name, cost=cost):
                self._refuse(tenant, name, rate)
        for name, rate, cost in checks:
            self._limiter.hit(rate, tenant, name, cost=cost)

    def _refuse(self, tenant: str, name: str, rate: RateLimitItem) -> None:
        stats = self._limiter.get_window_stats(rate, tenant, name)
        wait = max(1, math.ceil(stats.reset_time - time.time()))
        metrics.THROTTLED.labels(limit=name).inc()
        unit = "bytes" if name == "bytes" else f"{name} calls"
        raise RateLimited(
            f"this tenant may send at most {rate.amount} {unit} a minute to this server",
            limit=rate.amount,
            retry_after_s=wait,
        )

    def is_large(self, body_bytes: int) -> bool:
        return body_bytes >= self._settings.large_body_bytes

    @asynccontextmanager
    async def sized(self, tenant: str, body_bytes: int) -> AsyncIterator[None]:
        """A large call's slot for a body that large (`large_call`); nothing for another."""
        if not self.is_large(body_bytes):
            yield
            return
        async with self.large_call(tenant):
            yield

    @asynccontextmanager
    async def large_call(self, tenant: str) -> AsyncIterator[None]:
        """Holds one of the tenant's large-call slots (waiting in line for it); inside,
        `run` sends work to the thread pool."""
        most = self._settings.large_calls_per_tenant
        held = self._holders.get(tenant, 0)
        if held >= most + self._settings.large_calls_waiting_per_tenant:
            metrics.THROTTLED.labels(limit="large_calls").inc()
            raise LargeCallsWaiting(
                "this tenant has as many large calls in progress and waiting as this server "
                "takes; retry when one has finished",
                limit=most,
                retry_after_s=self._settings.large_call_retry_after_s,
            )
        slots = self._slots.setdefault(tenant, asyncio.Semaphore(most))
        self._holders[tenant] = held + 1
        self.traffic.set_aside()
        try:
            metrics.LARGE_CALLS.labels(state="waiting").inc()
            try:
                await slots.acquire()
            finally:
                metrics.LARGE_CALLS.labels(state="waiting").dec()
            metrics.LARGE_CALLS.labels(state="in_progress").inc()
            if not self._in_progress:
                self._pause_collector()
                if self._give_back_timer is not None:  # this call came before it was due
                    self._give_back_timer.cancel()
                    self._give_back_timer = None
            self._in_progress += 1
            marked = _in_large_call.set(True)
            try:
                with self._loop_paced():
                    yield
            finally:
                _in_large_call.reset(marked)
                metrics.LARGE_CALLS.labels(state="in_progress").dec()
                self._in_progress -= 1
                slots.release()
                if not self._in_progress:  # the last one: its memory goes back, soon
                    self._resume_collector()
                    self._give_back_timer = asyncio.get_running_loop().call_later(
                        self._settings.give_back_after_s, self._give_back
                    )
        finally:
            self.traffic.rejoin()
            self._holders[tenant] -= 1
            if not self._holders[tenant]:  # nobody holds or waits: forget the tenant
                del self._holders[tenant]
                del self._slots[tenant]

    def _pause_collector(self) -> None:
        """No cyclic garbage collection while a large call is in progress: a full collection
        walks every object alive, and a whole history held as messages is hundreds of thousands
        of them, so each one paused every thread for a tenth of a second or more (the call's
        own objects are freed by their reference counts when it ends; cycles made meanwhile
        wait for the collector's next run)."""
        self._collector_was_on = gc.isenabled()
        gc.disable()

    def _resume_collector(self) -> None:
        if self._collector_was_on:
            gc.enable()

    def _give_back(self) -> None:
        """`give_back_memory`, off the loop: the call's request was answered meanwhile."""
        self._give_back_timer = None
        with suppress(RuntimeError):  # the pool is shut down: the server is stopping
            asyncio.get_running_loop().run_in_executor(self._pool, give_back_memory)

    async def run(self, work: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """`work(*args)`: on the thread pool inside a large call, else here and now (a small
        call's steps cost less than the hand-over)."""
        if not _in_large_call.get():
            return work(*args, **kwargs)
        paced = functools.partial(self._paced, work, *args, **kwargs)
        call = functools.partial(contextvars.copy_context().run, paced)
        return await asyncio.get_running_loop().run_in_executor(self._pool, call)

    def _loop_paced(self) -> AbstractContextManager[None]:
        """The large call's own steps on the loop step aside as its worker's do (none at a
        wait of 0)."""
        wait_s = self._settings.step_aside_wait_ms / 1000
        if wait_s <= 0:
            return nullcontext()
        return loop_paced_by(LoopStepAside(self.traffic, wait_s))

    def _paced(self, work: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        wait_s = self._settings.step_aside_wait_ms / 1000
        if wait_s <= 0:
            return work(*args, **kwargs)
        run_s = self._settings.step_aside_run_ms / 1000
        with paced_by(StepAside(self.traffic, run_s, wait_s)):
            return work(*args, **kwargs)

    def close(self) -> None:
        if self._give_back_timer is not None:
            self._give_back_timer.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)
