"""Counting what a unit of work sends to the database: the statements per turn that the
bench reports and `ebbtide_turn_db_statements` observes.

A count is opened with `counting()` around the work; every statement the engine executes
while it is open (on any pooled connection, in tasks the work starts) adds one, and every
transaction it begins (a savepoint, on a connection bound to an outer transaction as the
tests' are) one to `transactions`. Each transaction costs two round trips more, its BEGIN and
its COMMIT. Work outside a count (the embedding worker, other requests) is not counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine


@dataclass
class StatementCount:
    statements: int = 0
    transactions: int = 0

    @property
    def round_trips(self) -> int:
        """Statements, and each transaction's BEGIN and COMMIT."""
        return self.statements + 2 * self.transactions


# The counts open in this context, outermost first: a turn counted inside a caller's count
# adds to both.
_OPEN: ContextVar[tuple[StatementCount, ...]] = ContextVar("ebbtide_statement_counts", default=())


@contextmanager
def counting() -> Iterator[StatementCount]:
    count = StatementCount()
    token = _OPEN.set((*_OPEN.get(), count))
    try:
        yield count
    finally:
        _OPEN.reset(token)


def _on_statement(*_: Any) -> None:
    for count in _OPEN.get():
        count.statements += 1


def _on_transaction(*_: Any) -> None:
    for count in _OPEN.get():
        count.transactions += 1


def install(engine: Engine) -> None:
    """Listens on `engine` (once, however often it is called)."""
    if not event.contains(engine, "before_cursor_execute", _on_statement):
        event.listen(engine, "before_cursor_execute", _on_statement)
        event.listen(engine, "begin", _on_transaction)
        event.listen(engine, "savepoint", _on_transaction)
