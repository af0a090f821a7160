"""Which sessions a statement reaches, read from the statement itself.

`StatementLog` records what a connection sends (SQLAlchemy's `before_cursor_execute`): the
SQL as the driver gets it, each execution's parameters, and the store function that issued
it. `routes()` parses a statement with Postgres's own parser (pglast) and tells, for every
reference to a distributed table, which session keys its distribution column is bound to by
equalities in its `WHERE` and `JOIN … ON` conjuncts: to a parameter or a literal, or to
another reference's key that is bound (correlated subqueries included). That is the question
Citus's router planner asks: a statement whose every reference is bound to the same single
key runs on one shard.

What counts as binding is deliberately narrow: equalities in top-level `AND`s (an `OR` binds
nothing), `col IN (one value)`, and casts of those. Anything else is reported unbound, so a
new statement that is routed by a cleverer route still has to be made plain, or listed.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import greenlet
from pglast import ast, parse_sql
from pglast.enums import A_Expr_Kind, BoolExprType
from sqlalchemy import event
from sqlalchemy.engine import Connection

from app.store.distribution import distributed_tables

DISTRIBUTION_COLUMN = {table.name: table.column for table in distributed_tables()}
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")
_STORE_PREFIX = "app.store."
_PLUMBING = {"app.store.database", "app.store.sealing", "app.store.statements"}


@dataclass(frozen=True)
class Execution:
    sql: str  # as the driver got it (`%(name)s` placeholders)
    parameters: Mapping[str, Any]
    origin: str  # `app.store.<module>.<function>` that issued it ("" when none did)


@dataclass(frozen=True)
class TableUse:
    table: str
    keys: frozenset[str]  # the session keys its distribution column is bound to


@dataclass(frozen=True)
class Route:
    uses: tuple[TableUse, ...]
    locks_rows: bool  # FOR UPDATE / FOR SHARE somewhere in it
    is_insert: bool

    @property
    def touches_distributed(self) -> bool:
        return bool(self.uses)

    @property
    def key(self) -> str | None:
        """The one session key every reference is bound to, or None (not routed)."""
        keys = {key for use in self.uses for key in use.keys}
        if len(keys) == 1 and all(use.keys for use in self.uses):
            return next(iter(keys))
        return None


@dataclass
class StatementLog:
    executions: list[Execution] = field(default_factory=list)

    @contextmanager
    def recording(self, connection: Connection) -> Iterator[StatementLog]:
        """Records every statement `connection` executes while open."""
        event.listen(connection, "before_cursor_execute", self._record)
        try:
            yield self
        finally:
            event.remove(connection, "before_cursor_execute", self._record)

    def _record(
        self,
        _conn: Any,
        _cursor: Any,
        statement: str,
        parameters: Any,
        _context: Any,
        executemany: bool,
    ) -> None:
        origin = _issuing_store_function()
        for each in parameters if executemany else [parameters]:
            self.executions.append(Execution(statement, dict(each or {}), origin))


def _issuing_store_function() -> str:
    """The innermost store function on the stack. SQLAlchemy's async layer runs the driver
    call in a greenlet of its own, so the awaiting code is on its parent's stack."""
    current: Any = greenlet.getcurrent()
    frame = sys._getframe(2)
    while True:
        while frame is not None:
            module = frame.f_globals.get("__name__", "")
            if module.startswith(_STORE_PREFIX) and module not in _PLUMBING:
                return f"{module}.{frame.f_code.co_name}"
            frame = frame.f_back  # type: ignore[assignment]
        current = current.parent
        if current is None or current.gr_frame is None:
            return ""
        frame = current.gr_frame


def routes(execution: Execution) -> Route:
    numbered, names = _numbered(execution.sql)
    values = [execution.parameters.get(name) for name in names]
    (raw,) = parse_sql(numbered)
    analysis = _Analysis(values)
    analysis.statement(raw.stmt, outer={})
    return Route(tuple(analysis.uses), analysis.locks_rows, isinstance(raw.stmt, ast.InsertStmt))


def _numbered(sql: str) -> tuple[str, list[str]]:
    """The statement with `$n` for psycopg's `%(name)s` (Postgres's parser reads only the
    former), and the names in number order."""
    names: list[str] = []

    def swap(match: re.Match[str]) -> str:
        if match.group(0) == "%%":
            return "%"
        name = match.group(1)
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return _PLACEHOLDER.sub(swap, sql), names


# A reference in scope: its alias → (table, whether it is distributed).
Scope = dict[str, tuple[str, bool]]
# The enclosing levels' bound references: alias → (table, the keys it is bound to).
Outer = Mapping[str, tuple[str, frozenset[str]]]


class _Analysis:
    def __init__(self, values: Sequence[Any]) -> None:
        self.values = values
        self.uses: list[TableUse] = []
        self.locks_rows = False
        self.ctes: set[str] = set()

    # --- statements ------------------------------------------------------------------------

    def statement(self, node: Any, outer: Outer) -> None:
        if isinstance(node, ast.SelectStmt):
            self.select(node, outer)
        elif isinstance(node, ast.InsertStmt):
            self.insert(node, outer)
        elif isinstance(node, ast.UpdateStmt):
            self.level(node.relation, node.fromClause, node.whereClause, outer, extra=node)
        elif isinstance(node, ast.DeleteStmt):
            self.level(node.relation, node.usingClause, node.whereClause, outer, extra=node)
        elif isinstance(node, ast.ExplainStmt):
            self.statement(node.query, outer)
        # SET, SHOW, transaction control: no table.

    def select(self, node: ast.SelectStmt, outer: Outer) -> None:
        if node.withClause is not None:
            for cte in node.withClause.ctes or ():
                self.ctes.add(cte.ctename)
                self.statement(cte.ctequery, outer)
        if node.larg is not None or node.rarg is not None:  # UNION and the like
            self.select(node.larg, outer)
            self.select(node.rarg, outer)
            return
        if node.lockingClause:
            self.locks_rows = True
        if node.valuesLists:
            for row in node.valuesLists:
                self.subqueries(row, outer)
            return
        self.level(None, node.fromClause, node.whereClause, outer, extra=node)

    def insert(self, node: ast.InsertStmt, outer: Outer) -> None:
        table = node.relation.relname
        source = node.selectStmt
        if table not in DISTRIBUTION_COLUMN:
            if source is not None:
                self.statement(source, outer)
            return
        columns = [target.name for target in node.cols or ()]
        column = DISTRIBUTION_COLUMN[table]
        keys: set[str] = set()
        bound = column in columns and source is not None and bool(source.valuesLists)
        if bound:
            at = columns.index(column)
            for row in source.valuesLists:
                value = self.value(row[at])
                if value is None:
                    bound = False
                else:
                    keys.add(value)
                self.subqueries(row, outer)
        elif source is not None:  # INSERT … SELECT: its own references are checked
            self.statement(source, outer)
        self.uses.append(TableUse(table, frozenset(keys) if bound else frozenset()))

    # --- one query level -------------------------------------------------------------------

    def level(
        self,
        target: ast.RangeVar | None,
        from_items: Sequence[Any] | None,
        where: Any,
        outer: Outer,
        extra: Any,
    ) -> None:
        scope: Scope = {}
        conjuncts: list[Any] = list(_and_terms(where))
        nested: list[Any] = []
        if target is not None:
            self.enter(target, scope)
        for item in from_items or ():
            self.from_item(item, scope, conjuncts, nested)
        bound = self.bind(scope, conjuncts, outer)
        for alias, (table, distributed) in scope.items():
            if distributed:
                self.uses.append(TableUse(table, bound.get(alias, frozenset())))
        inner = {**outer, **{a: (scope[a][0], keys) for a, keys in bound.items() if keys}}
        for subquery in nested:
            self.statement(subquery, inner)
        self.subqueries(where, inner)
        for part in ("targetList", "returningList", "havingClause"):
            self.subqueries(getattr(extra, part, None), inner)

    def enter(self, node: ast.RangeVar, scope: Scope) -> None:
        if node.relname in self.ctes and node.schemaname is None:
            return  # a CTE of this statement: checked where it is defined
        alias = node.alias.aliasname if node.alias is not None else node.relname
        scope[alias] = (node.relname, node.relname in DISTRIBUTION_COLUMN)

    def from_item(self, item: Any, scope: Scope, conjuncts: list[Any], nested: list[Any]) -> None:
        if isinstance(item, ast.RangeVar):
            self.enter(item, scope)
        elif isinstance(item, ast.JoinExpr):
            self.from_item(item.larg, scope, conjuncts, nested)
            self.from_item(item.rarg, scope, conjuncts, nested)
            conjuncts.extend(_and_terms(item.quals))
        elif isinstance(item, ast.RangeSubselect):
            nested.append(item.subquery)
        # RangeFunction (unnest …): no table.

    def bind(
        self, scope: Scope, conjuncts: Sequence[Any], outer: Outer
    ) -> dict[str, frozenset[str]]:
        """alias → the keys its distribution column is equal to, to a fixed point."""
        bound: dict[str, set[str]] = {alias: set(keys) for alias, (_, keys) in outer.items()}
        pairs = [pair for term in conjuncts if (pair := self.equality(term)) is not None]
        changed = True
        while changed:
            changed = False
            for left, right in pairs:
                for this, that in ((left, right), (right, left)):
                    alias = self.key_column(this, scope, outer)
                    if alias is None:
                        continue
                    if isinstance(that, str):
                        found = {that}
                    else:
                        other = self.key_column(that, scope, outer)
                        found = bound.get(other, set()) if other is not None else set()
                    if not found <= bound.setdefault(alias, set()):
                        bound[alias] |= found
                        changed = True
        return {alias: frozenset(keys) for alias, keys in bound.items() if alias in scope}

    def equality(self, term: Any) -> tuple[Any, Any] | None:
        """(left, right) of `a = b` or `a IN (b)`: a value as str, a column as its node."""
        if not isinstance(term, ast.A_Expr) or [n.sval for n in term.name] != ["="]:
            return None
        right = term.rexpr
        if term.kind == A_Expr_Kind.AEXPR_IN:
            if len(right) != 1:
                return None
            right = right[0]
        elif term.kind != A_Expr_Kind.AEXPR_OP:
            return None
        return self.operand(term.lexpr), self.operand(right)

    def operand(self, node: Any) -> Any:
        value = self.value(node)
        return value if value is not None else _uncast(node)

    def value(self, node: Any) -> str | None:
        node = _uncast(node)
        if isinstance(node, ast.ParamRef):
            found = self.values[node.number - 1]
            return found if isinstance(found, str) else None
        if isinstance(node, ast.A_Const) and isinstance(node.val, ast.String):
            return str(node.val.sval)
        return None

    def key_column(self, node: Any, scope: Scope, outer: Outer) -> str | None:
        """The alias whose distribution column `node` names, if it names one."""
        if not isinstance(node, ast.ColumnRef):
            return None
        fields = [f.sval for f in node.fields if isinstance(f, ast.String)]
        if len(fields) == 2:
            alias, column = fields
        elif len(fields) == 1 and len(scope) == 1:
            (alias,), column = scope.keys(), fields[0]
        else:
            return None
        if alias in scope:
            table = scope[alias][0]
        elif alias in outer:  # a correlated reference to an enclosing level
            table = outer[alias][0]
        else:
            return None
        return alias if DISTRIBUTION_COLUMN.get(table) == column else None

    def subqueries(self, node: Any, outer: Outer) -> None:
        """Analyses every subquery inside an expression, as a level of its own."""
        for sublink in _sublinks(node):
            self.statement(sublink.subselect, outer)


def _uncast(node: Any) -> Any:
    while isinstance(node, ast.TypeCast):
        node = node.arg
    return node


def _and_terms(node: Any) -> Iterator[Any]:
    if node is None:
        return
    if isinstance(node, ast.BoolExpr) and node.boolop == BoolExprType.AND_EXPR:
        for arg in node.args:
            yield from _and_terms(arg)
    else:
        yield node


def _sublinks(node: Any) -> Iterator[ast.SubLink]:
    """The subqueries in an expression tree (not those nested inside them)."""
    if isinstance(node, ast.SubLink):
        yield node
    elif isinstance(node, tuple | list):
        for item in node:
            yield from _sublinks(item)
    elif isinstance(node, ast.Node):
        for name in node:
            yield from _sublinks(getattr(node, name))
