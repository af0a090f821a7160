"""The servers `ebbtide bench` measures: a real `ebbtide serve` on loopback with the floor
endpoint on, and its resident memory read from /proc."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from app.loopback import free_loopback_port, wait_until_ready
from app.store.embedded import fresh_database, start_embedded
from app.store.migrate import upgrade_head


@dataclass(frozen=True)
class Server:
    base: str
    pid: int
    database_url: str  # the server's database, for reading its embedding queue


@contextmanager
def serving(
    database_url: str, embedder: str, log: Path, extra_env: dict[str, str] | None = None
) -> Iterator[Server]:
    """`ebbtide serve` on loopback with the floor endpoint (and `extra_env`), stopped at the
    end."""
    port = free_loopback_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "EBBTIDE_EMBEDDER__KIND": embedder,
        "EBBTIDE_FLOOR_ENDPOINT": "true",
        "EBBTIDE_LOG__LEVEL": "warning",
        **(extra_env or {}),
    }
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve"], env=env, stdout=out, stderr=out
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(base, process, log)
        yield Server(base, process.pid, database_url)
    finally:
        process.terminate()
        process.wait(timeout=60)


def rss_mib(pid: int, *, children: bool = True) -> float:
    """Resident memory of the server process (and its children, e.g. the embedder's)."""
    total = 0
    for candidate in [pid, *(descendants(pid) if children else [])]:
        try:
            for line in Path(f"/proc/{candidate}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except FileNotFoundError:
            continue
    return round(total / 1024, 1)


def descendants(pid: int) -> list[int]:
    """The process's children and theirs (from /proc), while it lives."""
    try:
        found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except FileNotFoundError:
        return []
    kids = [int(child) for child in found]
    return kids + [grandchild for kid in kids for grandchild in descendants(kid)]


def scratch_database(data_dir: Path, name: str) -> str:
    """A fresh, migrated database `name` on an embedded Postgres kept in `data_dir`."""
    url = fresh_database(start_embedded(data_dir, database="postgres"), name)
    upgrade_head(url)
    return url


def create_key(database_url: str, tenant: str, scopes: str = "memory:read,memory:write") -> str:
    """A new API key of `tenant`, made by `ebbtide keys create` (comma-separated scopes)."""
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "keys", "create", "--tenant", tenant, "--scopes", scopes],
        env={**os.environ, "DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]
