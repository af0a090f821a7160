"""The background embedder's process ends with `ebbtide serve`, even when the server is killed
with SIGKILL and runs no clean-up of its own (issue 34, N6)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from app.loopback import free_loopback_port, wait_until_ready
from tests.api.live import DATABASE_VARIABLES, fresh_named_database
from tests.builders import turn_body, user, words

GONE_WITHIN_S = 20


def children_of(pid: int) -> set[int]:
    """Live processes whose parent is `pid` (from /proc)."""
    found: set[int] = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, parent = stat.read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, IndexError):
            continue
        if int(parent) == pid and state != "Z":
            found.add(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended; only its exit status waits to be read


def test_the_embedding_process_ends_when_the_server_is_killed(
    database_url: str, tmp_path: Path
) -> None:
    with fresh_named_database(database_url, "worker_kill") as url:
        port = free_loopback_port()
        env = {k: v for k, v in os.environ.items() if k not in DATABASE_VARIABLES}
        env.update(
            HOST="127.0.0.1",
            PORT=str(port),
            DATABASE_URL=url,
            EBBTIDE_EMBEDDER__KIND="local",
            EBBTIDE_EMBEDDER__WORKER="true",
        )
        log = tmp_path / "serve.log"
        with log.open("wb") as out:
            server = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "serve"], env=env, stdout=out, stderr=out
            )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until_ready(base, server, log)
            children = _offload_until_the_worker_starts(base, server.pid)
            os.kill(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
            deadline = time.monotonic() + GONE_WITHIN_S
            while any(alive(child) for child in children) and time.monotonic() < deadline:
                time.sleep(0.5)
            assert not [child for child in children if alive(child)], log.read_text()
        finally:
            if server.poll() is None:
                server.kill()
                server.wait(timeout=30)


def _offload_until_the_worker_starts(base: str, server: int) -> set[int]:
    """Turns that offload until the server has started its embedding process; its children."""
    small = {"context_window": 2_000, "policy": {"floor_turns": 1, "floor_tokens": 0}}
    with httpx.Client(base_url=base, timeout=60) as client:
        for turn in range(40):
            body = turn_body(user(f"turn {turn} " + words(200, "w")), **small)
            assert client.post("/sessions/kill/turn", json=body).status_code == 200
            children = children_of(server)
            if children:
                time.sleep(2)  # let the pool finish starting its process
                return children_of(server)
    raise AssertionError("the server never started its embedding process")
