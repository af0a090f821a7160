"""What one tenant may ask of this process, so that no caller stalls the others
(docs/RELIABILITY.md, "One caller against the rest").

- Rates, per tenant and minute: turns, proxy calls, and the bytes of both (the `limits`
  library's sliding-window counters, in memory: each replica counts its own calls). A call
  over one is refused before anything is read or written: 429 with Retry-After.
- Large calls (a body of at least `large_body_bytes`: a whole history posted at once): a
  tenant has at most `large_calls_per_tenant` in progress, the next few wait in line holding
  only their bytes, and one past the line is refused. While it is in progress, a large call's
  CPU-heavy steps (parsing, reconciling, digesting, planning, chunking, extracting facts) run
  on a small thread pool (`run`) instead of the event loop, which keeps answering everyone
  else between the interpreter's switches. There the steps are paced (`DutyCycle`): after
  `worker_run_ms` of work the thread sleeps `worker_rest_ms` at its next `pace()`, so the
  loop holds the interpreter alone for that long and finishes its other callers' round trips
  without waiting out a switch interval at each one. The call's own steps on the loop (its
  rows, a statement at a time) rest in the same proportion (`LoopDutyCycle`).
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
from collections.abc import AsyncIterator, Awaitable, Callable
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


class DutyCycle:
    """A pacer for one step on a worker thread, at its `pace()` calls: once `run_s` of the
    thread's own CPU time (`time.thread_time`: not its waits for the interpreter's lock,
    the database or the network) has gone by since the last rest, it sleeps `rest_s` for
    each `run_s` of it; a sleep lets the interpreter's lock go."""

    def __init__(
        self,
        run_s: float,
        rest_s: float,
        clock: Callable[[], float] = time.thread_time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._run_s, self._rest_s = run_s, rest_s
        self._clock, self._sleep = clock, sleep
        self._since = clock()

    def __call__(self) -> None:
        worked = self._clock() - self._since
        if worked >= self._run_s:
            self._sleep(self._rest_s * worked / self._run_s)
            self._since = self._clock()


class LoopDutyCycle:
    """A pacer for a large call's own steps on the event loop (`loop_step()`, a statement of
    its rows each): the loop thread's CPU time inside each step adds up, and once it reaches
    `run_s` the step ends with a rest `rest_s / run_s` times as long, the loop serving
    everyone else meanwhile. Only the steps count: the loop's time between them belongs to
    other callers."""

    def __init__(
        self,
        run_s: float,
        rest_s: float,
        clock: Callable[[], float] = time.thread_time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._run_s, self._rest_s = run_s, rest_s
        self._clock, self._sleep = clock, sleep
        self._worked = 0.0

    @asynccontextmanager
    async def step(self) -> AsyncIterator[None]:
        started = self._clock()
        yield
        self._worked += self._clock() - started
        if self._worked >= self._run_s:
            rest, self._worked = self._rest_s * self._worked / self._run_s, 0.0
            await self._sleep(rest)


class CallKind(StrEnum):
    TURN = "turn"
    PROXY = "proxy"


class Throttle:
    def __init__(self, settings: ThrottleSettings) -> None:
        self._settings = settings
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
        """The large call's own steps on the loop, paced as its worker's (none at rest 0)."""
        rest_s = self._settings.worker_rest_ms / 1000
        if rest_s <= 0:
            return nullcontext()
        return loop_paced_by(LoopDutyCycle(self._settings.worker_run_ms / 1000, rest_s))

    def _paced(self, work: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        rest_s = self._settings.worker_rest_ms / 1000
        if rest_s <= 0:
            return work(*args, **kwargs)
        with paced_by(DutyCycle(self._settings.worker_run_ms / 1000, rest_s)):
            return work(*args, **kwargs)

    def close(self) -> None:
        if self._give_back_timer is not None:
            self._give_back_timer.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)
