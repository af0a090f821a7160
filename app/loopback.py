"""A local server on a free loopback port: what the bench and the tests that start a real
`ebbtide serve` (or a fake provider) both need. Loopback only: nothing here listens beyond
127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import httpx

START_TIMEOUT_S = 180


def free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_ready(
    base: str, process: subprocess.Popen[bytes], log: Path, timeout_s: float = START_TIMEOUT_S
) -> None:
    """Polls `/readyz` until the server answers 200; raises with its log if it exits or is
    not ready within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited early:\n{log.read_text()}")
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"the server was not ready in {timeout_s} s:\n{log.read_text()}")
