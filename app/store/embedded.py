"""The embedded Postgres 16 + pgvector (the `pgserver` package) used when no DATABASE_URL is
set. It listens on a Unix socket inside the data folder only, never on a TCP port."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

APP_DATABASE = "ebbtide"


def start_embedded(data_dir: Path, *, database: str = APP_DATABASE) -> str:
    """Starts (or joins) the embedded server under `data_dir/pg` and returns a URL to
    `database`, creating the database on first use. The server stops when the last process
    that started it exits."""
    from pgserver.postgres_server import get_server  # only the embedded mode needs it

    pgdata = (data_dir / "pg").resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    server: Any = get_server(pgdata, cleanup_mode="stop")
    ensure_database(server.get_uri(), database)
    return str(server.get_uri(database))


def ensure_database(admin_url: str, database: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as connection:
        exists = connection.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (database,)
        ).fetchone()
        if not exists:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))


def drop_database(admin_url: str, database: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
        )


def stop_embedded(data_dir: Path) -> None:
    """Stops the embedded server (fast shutdown); `restart_embedded` brings it back."""
    import importlib

    from pgserver.postgres_server import get_server

    # pgserver generates its command wrappers at import time, so mypy cannot see them.
    pg_ctl: Any = vars(importlib.import_module("pgserver._commands"))["pg_ctl"]
    server: Any = get_server((data_dir / "pg").resolve(), cleanup_mode="stop")
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)


def restart_embedded(data_dir: Path) -> None:
    from pgserver.postgres_server import get_server

    server: Any = get_server((data_dir / "pg").resolve(), cleanup_mode="stop")
    server.ensure_postgres_running()
