"""Yield points for the long work a whole history goes through.

- `pace()` between two items of a long loop (tokenizing, splitting into sentences,
  extracting facts, chunking, digests, scoring);
- `async with loop_step():` around one step of a long task on the event loop itself (a
  statement of a large call's rows).

Both do nothing unless a pacer is set for the current context (`paced_by`,
`loop_paced_by`). The service sets them for a large call: while other calls are in progress,
its worker thread waits at a `pace()` and its steps on the loop wait before they start.
Either way the event loop has the interpreter's lock to itself meanwhile: it gives the lock
up at every read and write of a socket, and would otherwise win it back only at the
interpreter's switch interval, once per round trip of every other caller
(docs/RELIABILITY.md, "One caller against the rest").
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Protocol, TypeVar

Pacer = Callable[[], None]
T = TypeVar("T")


class LoopPacer(Protocol):
    def step(self) -> AbstractAsyncContextManager[None]:
        """Around one step on the event loop: may wait before it."""
        ...


_pacer: ContextVar[Pacer | None] = ContextVar("pacer", default=None)
_loop_pacer: ContextVar[LoopPacer | None] = ContextVar("loop_pacer", default=None)


@contextmanager
def _set(var: ContextVar[T | None], value: T) -> Iterator[None]:
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def pace() -> None:
    """Between two items of a long loop: the context's pacer, if any, may pause here."""
    pacer = _pacer.get()
    if pacer is not None:
        pacer()


def current_pacer() -> Pacer | None:
    """What `pace()` calls in this context (None: nothing)."""
    return _pacer.get()


def current_loop_pacer() -> LoopPacer | None:
    """What `loop_step()` steps with in this context (None: nothing)."""
    return _loop_pacer.get()


@contextmanager
def paced_by(pacer: Pacer) -> Iterator[None]:
    """`pace()` calls `pacer` inside the block (in this context only)."""
    with _set(_pacer, pacer):
        yield


@asynccontextmanager
async def loop_step() -> AsyncIterator[None]:
    """One step of a long task on the event loop: with a loop pacer in the context, it may
    wait before the step, and the loop serves everyone else meanwhile."""
    pacer = _loop_pacer.get()
    if pacer is None:
        yield
        return
    async with pacer.step():
        yield


@contextmanager
def loop_paced_by(pacer: LoopPacer) -> Iterator[None]:
    """`loop_step()` steps with `pacer` inside the block (in this context only)."""
    with _set(_loop_pacer, pacer):
        yield
