"""Citus's rules for a schema distributed by one column, checked in the catalog of a real
database (plain or hash-partitioned; partitions are read through their parent):

- every table is either distributed (by its session key) or a reference table;
- the distribution columns share one type (co-location needs it);
- every unique index of a distributed table (its primary key, its unique constraints) holds
  the distribution column;
- a foreign key between distributed tables pairs their distribution columns; a reference
  table never refers to a distributed one;
- a distributed table's identity columns are `bigint` (Citus gives each node its own range
  of a sequence, which needs the room).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

_TABLES = text(
    "SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
    "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition "
    "AND c.relname <> 'alembic_version'"
)
_KEY_TYPES = text(
    "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute AS a "
    "JOIN pg_class AS c ON c.oid = a.attrelid "
    "WHERE c.relname = ANY(:tables) AND a.attname = ANY(:columns) AND a.attnum > 0 "
    "AND NOT c.relispartition"
)
_UNIQUE_INDEXES = text(
    "SELECT c.relname, i.indexrelid::regclass::text, "
    "array(SELECT a.attname::text FROM pg_attribute AS a "
    "      WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)) "
    "FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indrelid "
    "WHERE i.indisunique AND c.relname = ANY(:tables) AND NOT c.relispartition"
)
_FOREIGN_KEYS = text(
    "SELECT k.conname, f.relname, t.relname, "
    "array(SELECT a.attname::text FROM unnest(k.conkey) WITH ORDINALITY AS u(n, o) "
    "      JOIN pg_attribute AS a ON a.attrelid = k.conrelid AND a.attnum = u.n ORDER BY u.o), "
    "array(SELECT a.attname::text FROM unnest(k.confkey) WITH ORDINALITY AS u(n, o) "
    "      JOIN pg_attribute AS a ON a.attrelid = k.confrelid AND a.attnum = u.n ORDER BY u.o) "
    "FROM pg_constraint AS k JOIN pg_class AS f ON f.oid = k.conrelid "
    "JOIN pg_class AS t ON t.oid = k.confrelid "
    "WHERE k.contype = 'f' AND k.conparentid = 0 AND NOT f.relispartition "
    "AND NOT t.relispartition"
)
_IDENTITIES = text(
    "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute AS a "
    "JOIN pg_class AS c ON c.oid = a.attrelid "
    "WHERE c.relname = ANY(:tables) AND NOT c.relispartition AND a.attnum > 0 "
    "AND NOT a.attisdropped "
    "AND (a.attidentity <> '' OR pg_get_serial_sequence(c.relname, a.attname) IS NOT NULL)"
)


async def citus_rule_breaks(
    connection: AsyncConnection, distributed: Mapping[str, str], reference: Sequence[str]
) -> list[str]:
    """What in the database's schema Citus would refuse, one line each ([] when nothing).
    `distributed`: table → its distribution column."""
    tables = list(distributed)
    breaks = [
        f"{name}: neither distributed nor a reference table"
        for (name,) in (await connection.execute(_TABLES)).all()
        if name not in distributed and name not in reference
    ]
    columns = {"tables": tables, "columns": sorted(set(distributed.values()))}
    key_types = {
        table: kind
        for table, column, kind in (await connection.execute(_KEY_TYPES, columns)).all()
        if column == distributed[table]
    }
    breaks += [f"{t}: no column {distributed[t]}" for t in tables if t not in key_types]
    if len(set(key_types.values())) > 1:
        breaks.append(f"distribution columns of different types: {sorted(key_types.items())}")
    unique = (await connection.execute(_UNIQUE_INDEXES, {"tables": tables})).all()
    for table, index, indexed in unique:
        if distributed[table] not in indexed:
            breaks.append(f"{table}: unique index {index} {indexed} lacks {distributed[table]}")
    for name, source, target, referring, referred in (
        await connection.execute(_FOREIGN_KEYS)
    ).all():
        if source in reference and target in distributed:
            breaks.append(f"{source}: foreign key {name} from a reference to a distributed table")
        if source in distributed and target in distributed:
            pair = (distributed[source], distributed[target])
            if pair not in zip(referring, referred, strict=True):
                breaks.append(f"{source}: foreign key {name} does not pair {pair}")
    for table, column, kind in (await connection.execute(_IDENTITIES, {"tables": tables})).all():
        if kind != "bigint":
            breaks.append(f"{table}.{column}: a {kind} sequence (Citus needs bigint)")
    return breaks
