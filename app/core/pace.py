"""Yield points for the long loops a whole history goes through (tokenizing, splitting into
sentences, extracting facts, chunking, scoring): `pace()` between two items; and for the
long tasks it gives the event loop itself (its rows, written a statement at a time):
`await pace_loop()` between two statements.

It does nothing unless a pacer is set for the current context (`paced_by`). The service sets
one for a large call's steps on its worker thread, where the pacer now and then sleeps a
moment: the thread shares the interpreter's lock with the event loop, and the loop, which
gives the lock up at every read and write of a socket, would otherwise win it back only at
the interpreter's switch interval, once per round trip of every other caller
(docs/RELIABILITY.md, "One caller against the rest").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Pacer = Callable[[], None]
LoopPacer = Callable[[], Awaitable[None]]

_pacer: ContextVar[Pacer | None] = ContextVar("pacer", default=None)
_loop_pacer: ContextVar[LoopPacer | None] = ContextVar("loop_pacer", default=None)


def pace() -> None:
    """Between two items of a long loop: the context's pacer, if any, may pause here."""
    pacer = _pacer.get()
    if pacer is not None:
        pacer()


def current_pacer() -> Pacer | None:
    """What `pace()` calls in this context (None: nothing)."""
    return _pacer.get()


def current_loop_pacer() -> LoopPacer | None:
    """What `pace_loop()` awaits in this context (None: nothing)."""
    return _loop_pacer.get()


@contextmanager
def paced_by(pacer: Pacer) -> Iterator[None]:
    """`pace()` calls `pacer` inside the block (in this context only)."""
    token = _pacer.set(pacer)
    try:
        yield
    finally:
        _pacer.reset(token)


async def pace_loop() -> None:
    """Between two steps of a long task on the event loop: the context's loop pacer, if any,
    may wait here, and the loop serves everyone else meanwhile."""
    pacer = _loop_pacer.get()
    if pacer is not None:
        await pacer()


@contextmanager
def loop_paced_by(pacer: LoopPacer) -> Iterator[None]:
    """`pace_loop()` awaits `pacer` inside the block (in this context only)."""
    token = _loop_pacer.set(pacer)
    try:
        yield
    finally:
        _loop_pacer.reset(token)
