"""The embedded Postgres 16 + pgvector (the `pgserver` package) used when no DATABASE_URL is
set. It listens on a Unix socket inside the data folder only, never on a TCP port.

pgserver counts the processes that use a server in a file and stops the server when the last
one exits. A process killed without running its exit hook stays counted, and the server would
never stop again: the dead are dropped from the count before every start. A server that dies
while the service runs is started again by `supervise_embedded`.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

APP_DATABASE = "ebbtide"
HANDLES_FILE = ".handle_pids.json"  # pgserver's count of the processes using the server

log = logging.getLogger("ebbtide.embedded")


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


def _pgdata(data_dir: Path) -> Path:
    return (data_dir / "pg").resolve()


def forget_dead_handles(pgdata: Path) -> list[int]:
    """Drops processes that died without their exit hook from pgserver's count; the pids
    dropped."""
    from pgserver.postgres_server import PostgresServer
    from pgserver.utils import DiskList, process_is_running

    handles = DiskList(pgdata / HANDLES_FILE)
    with PostgresServer._lock:
        pids = handles.get()
        alive = [pid for pid in pids if process_is_running(pid)]
        if alive != pids:
            handles.put(alive)
    return [pid for pid in pids if pid not in alive]


def _server(data_dir: Path) -> Any:
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI) as pgserver loads;
        # its fallback directory serves pgserver as well.
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        from pgserver.postgres_server import get_server  # only the embedded mode needs it

        pgdata = _pgdata(data_dir)
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        if pgdata.exists():
            forget_dead_handles(pgdata)
        return get_server(pgdata, cleanup_mode="stop")


def embedded_running(data_dir: Path) -> bool:
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(_pgdata(data_dir))
    return info is not None and bool(info.is_running())


def stop_embedded(data_dir: Path) -> None:
    """Stops the embedded server (fast shutdown); `restart_embedded` brings it back."""
    import importlib

    # pgserver generates its command wrappers at import time, so mypy cannot see them.
    pg_ctl: Any = vars(importlib.import_module("pgserver._commands"))["pg_ctl"]
    server = _server(data_dir)
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)


def restart_embedded(data_dir: Path) -> None:
    from pgserver.postgres_server import PostgresServer

    server = _server(data_dir)
    with PostgresServer._lock:  # pgserver starts servers only under its lock
        server.ensure_postgres_running()


async def supervise_embedded(data_dir: Path, interval_s: float) -> None:
    """Starts the embedded server again whenever it is found down (runs until cancelled).
    Turns meanwhile answer 503 and are retried by their clients with the same key."""
    while True:
        await asyncio.sleep(interval_s)
        if not await asyncio.to_thread(embedded_running, data_dir):
            log.warning("embedded postgres was down; starting it again")
            await asyncio.to_thread(restart_embedded, data_dir)
