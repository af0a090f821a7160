"""The embedded Postgres outlives no one and dies for no longer than a check: a server killed
without its exit hook does not keep it running forever, and one that dies under a running
service is started again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from app.loopback import free_loopback_port, wait_until_ready
from app.store.embedded import embedded_running

READY_WITHIN_S = 60


def start_in_a_process(data: Path, *, then_kill: bool) -> subprocess.CompletedProcess[bytes]:
    script = (
        "import os, signal\n"
        "from pathlib import Path\n"
        "from app.store.embedded import start_embedded\n"
        f"start_embedded(Path({str(data)!r}))\n"
        + ("os.kill(os.getpid(), signal.SIGKILL)\n" if then_kill else "")
    )
    return subprocess.run([sys.executable, "-c", script], timeout=120, check=False)


def test_a_process_killed_without_its_exit_hook_does_not_keep_postgres_up(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    assert start_in_a_process(data, then_kill=True).returncode == -signal.SIGKILL
    assert embedded_running(data)  # orphaned: its starter is dead, it is still up
    assert start_in_a_process(data, then_kill=False).returncode == 0
    assert not embedded_running(data)  # the last live user stopped it at its exit


def postmaster_pid(data: Path) -> int:
    return int((data / "pg" / "postmaster.pid").read_text().splitlines()[0])


def test_postgres_that_dies_under_the_service_is_started_again(tmp_path: Path) -> None:
    data, port, log = tmp_path / "data", free_loopback_port(), tmp_path / "serve.log"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "EBBTIDE_DATABASE_URL", "PYTHONMALLOC"}
    }
    env.update(
        HOST="127.0.0.1",
        PORT=str(port),
        EBBTIDE_DATA_DIR=str(data),
        EBBTIDE_EMBEDDER__KIND="hash",
        EBBTIDE_DB__EMBEDDED_CHECK_S="0.5",
    )
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve"], env=env, stdout=out, stderr=out
        )
    base = f"http://127.0.0.1:{port}"
    turn = {"messages": [{"role": "user", "content": "hello"}], "model": "gpt-4o"}
    try:
        wait_until_ready(base, server, log)
        # `serve` started itself again, as the same process, on the C allocator.
        assert b"PYTHONMALLOC=malloc" in Path(f"/proc/{server.pid}/environ").read_bytes().split(
            b"\0"
        )
        assert httpx.post(f"{base}/sessions/s/turn", json=turn, timeout=30).status_code == 200
        os.kill(postmaster_pid(data), signal.SIGKILL)
        deadline = time.monotonic() + READY_WITHIN_S
        statuses = set()
        while time.monotonic() < deadline:
            ready = httpx.get(f"{base}/readyz", timeout=5).status_code
            statuses.add(ready)
            if ready == 200 and embedded_running(data):
                break
            time.sleep(0.2)
        assert embedded_running(data), log.read_text()
        again = {"messages": [{"role": "user", "content": "still there?"}]}
        answered = httpx.post(f"{base}/sessions/s/turn", json=again, timeout=30)
        assert answered.status_code == 200 and answered.json()["turn"] == 2, answered.text
        assert statuses <= {200, 503}  # down: unavailable, never an error of another kind
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert not embedded_running(data)  # a clean exit stops it
    assert "starting it again" in log.read_text()
