"""The background embedder's process ends with `ebbtide serve`, even when the server is killed
with SIGKILL and runs no clean-up of its own (issue 34, N6)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx

from app.bench.servers import descendants, serving
from tests.api.live import fresh_named_database
from tests.builders import turn_body, user, words

GONE_WITHIN_S = 20


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended; only its exit status waits to be read


def test_the_embedding_process_ends_when_the_server_is_killed(
    database_url: str, tmp_path: Path
) -> None:
    with (
        fresh_named_database(database_url, "worker_kill") as url,
        serving(
            url, "local", tmp_path / "serve.log", {"EBBTIDE_EMBEDDER__WORKER": "true"}
        ) as server,
    ):
        children = _offload_until_the_worker_starts(server.base, server.pid)
        os.kill(server.pid, signal.SIGKILL)
        deadline = time.monotonic() + GONE_WITHIN_S
        while any(alive(child) for child in children) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not [child for child in children if alive(child)]


def _offload_until_the_worker_starts(base: str, server: int) -> set[int]:
    """Turns that offload until the server has started its embedding process; its children."""
    small = {"context_window": 2_000, "policy": {"floor_turns": 1, "floor_tokens": 0}}
    with httpx.Client(base_url=base, timeout=60) as client:
        for turn in range(40):
            body = turn_body(user(f"turn {turn} " + words(200, "w")), **small)
            assert client.post("/sessions/kill/turn", json=body).status_code == 200
            if descendants(server):
                time.sleep(2)  # let the pool finish starting its process
                return set(descendants(server))
    raise AssertionError("the server never started its embedding process")
