"""How the schema shards by session (docs/SCALING.md).

Every table is one of two kinds. Each row of a *distributed* table belongs to one session and
carries its key in the distribution column: `sessions.id`, every other table's `session_id`.
All of them are co-located (a session's rows of every table live on one shard), so a
statement that filters on the key with an equality runs on one shard, and the foreign keys
between them hold within it. A *reference* table has no session key and is small (`tenants`,
`api_keys`, `inspector_logins`): Citus copies it to every worker.

`citus_statements()` is what turns a migrated database into a distributed one on Citus.
`partition_by_session()` is its stand-in on plain Postgres: it rebuilds each distributed
table of an empty, migrated database as a table partitioned by hash of the key, which gives
the planner the same question Citus's router asks (does this statement reach one shard?),
and lets a test answer it with `EXPLAIN`.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg import sql

from app.store.database import libpq_url
from app.store.models import Base

REFERENCE_TABLES = ("tenants", "api_keys", "inspector_logins")
SESSION_TABLE = "sessions"
SESSION_KEY_COLUMN = "session_id"  # the distribution column of every table but `sessions`


class NotDistributable(Exception):
    """A table breaks the rule: it is not a reference table, yet carries no session key."""


class NotEmpty(Exception):
    """Partitioning rebuilds tables: it is for an empty, freshly migrated database only."""


class CitusMissing(Exception):
    """The database has no `citus` extension: there is nothing to distribute on."""


@dataclass(frozen=True)
class DistributedTable:
    name: str
    column: str  # the distribution column: the session key


def distributed_tables() -> list[DistributedTable]:
    """Every table but the reference ones, parents before the tables that refer to them (the
    order `create_distributed_table` needs for co-located foreign keys)."""
    found = []
    for table in Base.metadata.sorted_tables:
        if table.name in REFERENCE_TABLES:
            continue
        column = "id" if table.name == SESSION_TABLE else SESSION_KEY_COLUMN
        if column not in table.columns:
            raise NotDistributable(f"{table.name} has no {column} column")
        found.append(DistributedTable(table.name, column))
    return found


def citus_statements() -> list[str]:
    """The calls that distribute a migrated database on Citus: reference tables first (the
    sessions' foreign key to `tenants` needs it), then every distributed table co-located
    with `sessions`."""
    return [statement for _, statement in _citus_calls()]


def _citus_calls() -> list[tuple[str, str]]:
    calls = [(name, f"SELECT create_reference_table('{name}');") for name in REFERENCE_TABLES]
    for table in distributed_tables():
        colocation = "" if table.name == SESSION_TABLE else f", colocate_with => '{SESSION_TABLE}'"
        calls.append(
            (
                table.name,
                f"SELECT create_distributed_table('{table.name}', '{table.column}'{colocation});",
            )
        )
    return calls


def distribute_on_citus(url: str) -> list[str]:
    """Runs `citus_statements()` on the migrated database at `url` (a Citus coordinator with
    its workers added), skipping tables already distributed, so that it can run again after
    a failure. Each call commits on its own. Returns the statements it ran."""
    with psycopg.connect(libpq_url(url), autocommit=True) as db:
        _require_citus(db)
        done = {
            row[0]
            for row in db.execute("SELECT logicalrelid::regclass::text FROM pg_dist_partition")
        }
        ran = []
        for table, statement in _citus_calls():
            if table not in done:
                db.execute(statement)
                ran.append(statement)
        return ran


def require_citus(url: str) -> None:
    """Raises CitusMissing unless the database at `url` has the citus extension."""
    with psycopg.connect(libpq_url(url), autocommit=True) as db:
        _require_citus(db)


def _require_citus(db: psycopg.Connection) -> None:
    if db.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone() is None:
        raise CitusMissing("the database has no citus extension (CREATE EXTENSION citus)")


def partition_name(table: str, remainder: int) -> str:
    return f"{table}_p{remainder}"


def partition_by_session(url: str, partitions: int) -> None:
    """Rebuilds every distributed table of the empty, migrated database at `url` as
    `PARTITION BY HASH` of its session key, in `partitions` partitions (`<table>_p<n>`), with
    the same columns, defaults, identities, constraints, indexes and foreign keys, under the
    same names. One transaction: it happens whole or not at all."""
    tables = distributed_tables()
    with psycopg.connect(libpq_url(url)) as db:
        foreign_keys = _foreign_keys(db, [t.name for t in tables])
        for name, owner, _ in foreign_keys:
            db.execute(
                sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(
                    sql.Identifier(owner), sql.Identifier(name)
                )
            )
        for table in tables:
            _rebuild_partitioned(db, table, partitions)
        for name, owner, definition in foreign_keys:
            db.execute(
                sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} {}").format(
                    sql.Identifier(owner), sql.Identifier(name), sql.SQL(definition)
                )
            )


def _foreign_keys(db: psycopg.Connection, tables: list[str]) -> list[tuple[str, str, str]]:
    """(name, table, definition) of every foreign key from or to one of `tables`."""
    rows = db.execute(
        "SELECT c.conname, c.conrelid::regclass::text, pg_get_constraintdef(c.oid) "
        "FROM pg_constraint AS c WHERE c.contype = 'f' "
        "AND (c.conrelid::regclass::text = ANY(%(t)s) OR c.confrelid::regclass::text = ANY(%(t)s))"
        " ORDER BY c.conname",
        {"t": tables},
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def _rebuild_partitioned(db: psycopg.Connection, table: DistributedTable, partitions: int) -> None:
    name = sql.Identifier(table.name)
    if db.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(name)).fetchone() != (False,):
        raise NotEmpty(f"{table.name} has rows")
    keys = db.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = %s::regclass AND contype IN ('p', 'u') ORDER BY conname",
        (table.name,),
    ).fetchall()
    indexes = db.execute(
        "SELECT pg_get_indexdef(i.indexrelid) FROM pg_index AS i WHERE i.indrelid = %s::regclass "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint AS c WHERE c.conindid = i.indexrelid) "
        "ORDER BY i.indexrelid::regclass::text",
        (table.name,),
    ).fetchall()
    identities = [
        r[0]
        for r in db.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attidentity <> ''",
            (table.name,),
        ).fetchall()
    ]
    plain = sql.Identifier(f"{table.name}__plain")
    db.execute(sql.SQL("ALTER TABLE {} RENAME TO {}").format(name, plain))
    db.execute(
        sql.SQL(
            "CREATE TABLE {} (LIKE {} INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING GENERATED "
            "INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMPRESSION INCLUDING COMMENTS) "
            "PARTITION BY HASH ({})"
        ).format(name, plain, sql.Identifier(table.column))
    )
    db.execute(sql.SQL("DROP TABLE {}").format(plain))  # its indexes' names are free again
    for remainder in range(partitions):
        db.execute(
            sql.SQL(
                "CREATE TABLE {} PARTITION OF {} FOR VALUES WITH (MODULUS {}, REMAINDER {})"
            ).format(
                sql.Identifier(partition_name(table.name, remainder)),
                name,
                sql.Literal(partitions),
                sql.Literal(remainder),
            )
        )
    for constraint, definition in keys:
        db.execute(
            sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} {}").format(
                name, sql.Identifier(constraint), sql.SQL(definition)
            )
        )
    for (definition,) in indexes:  # `CREATE INDEX <its name> ON public.<table> …`
        db.execute(sql.SQL(definition))
    for column in identities:  # the copy's sequence was named while the original's existed
        _rename_sequence(db, table.name, column)


def _rename_sequence(db: psycopg.Connection, table: str, column: str) -> None:
    """Gives the identity's sequence the name Postgres gives it in a table made afresh."""
    found = db.execute(
        "SELECT s.relname FROM pg_class AS s "
        "WHERE s.oid = pg_get_serial_sequence(%s, %s)::regclass",
        (table, column),
    ).fetchone()
    wanted = f"{table}_{column}_seq"
    if found is not None and found[0] != wanted:
        db.execute(
            sql.SQL("ALTER SEQUENCE {} RENAME TO {}").format(
                sql.Identifier(found[0]), sql.Identifier(wanted)
            )
        )
