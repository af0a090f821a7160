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
    server = _server(data_dir)
    ensure_database(server.get_uri(), database)
    return str(server.get_uri(database))


def url_of_database(server_url: str, database: str) -> str:
    """The URL of another database on the same server (host, port, socket kept)."""
    base, _, query = server_url.partition("?")
    url = f"{base.rsplit('/', 1)[0]}/{database}"
    return f"{url}?{query}" if query else url


def fresh_database(server_url: str, database: str) -> str:
    """Drops and recreates `database` on the server; its URL (not yet migrated)."""
    drop_database(server_url, database)
    ensure_database(server_url, database)
    return url_of_database(server_url, database)


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


def _server(data_dir: Path) -> Any:
    from pgserver.postgres_server import get_server  # only the embedded mode needs it

    pgdata = (data_dir / "pg").resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    return get_server(pgdata, cleanup_mode="stop")


def stop_embedded(data_dir: Path) -> None:
    """Stops the embedded server (fast shutdown); `restart_embedded` brings it back."""
    import importlib

    # pgserver generates its command wrappers at import time, so mypy cannot see them.
    pg_ctl: Any = vars(importlib.import_module("pgserver._commands"))["pg_ctl"]
    server = _server(data_dir)
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)


def restart_embedded(data_dir: Path) -> None:
    _server(data_dir).ensure_postgres_running()
