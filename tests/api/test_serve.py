"""`ebbtide serve` as `make run` starts it: embedded Postgres, migrations, HTTP on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

START_TIMEOUT_S = 120


def free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_ready(base: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"serve exited early:\n{log.read_text()}")
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"serve was not ready in {START_TIMEOUT_S}s:\n{log.read_text()}")


def test_serve_starts_embedded_postgres_migrates_and_answers_turns(tmp_path: Path) -> None:
    port = free_loopback_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "EBBTIDE_DATABASE_URL"}}
    env.update(
        {
            "EBBTIDE_DATA_DIR": str(tmp_path / "data"),
            "HOST": "127.0.0.1",
            "PORT": str(port),
            "EBBTIDE_LOG_LEVEL": "warning",
        }
    )
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(base, process, log)
        response = httpx.post(
            f"{base}/sessions/e2e/turn",
            timeout=30,
            json={"messages": [{"role": "user", "content": "只查华东仓"}], "model": "qwen-plus"},
        )
        assert response.status_code == 200, response.text
        assert response.json()["usage"]["context_window"] == 131_072
        assert (tmp_path / "data" / "pg" / "PG_VERSION").exists()
    finally:
        process.terminate()
        process.wait(timeout=60)
    assert process.returncode == 0, log.read_text()
