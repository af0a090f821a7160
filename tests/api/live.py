"""A real `ebbtide serve` process on loopback, for tests that need the whole stack (uvicorn,
the lifespan, the MCP mount, the embedded Postgres) rather than the ASGI app in-process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from app.bench.upstream import ScriptedUpstream, serve_in_thread
from app.loopback import free_loopback_port, wait_until_ready
from app.store.embedded import drop_database, fresh_database, url_of_database
from tests.builders import HASH_RECALL

DATABASE_VARIABLES = frozenset({"DATABASE_URL", "EBBTIDE_DATABASE_URL"})


@dataclass(frozen=True)
class LiveServer:
    base: str
    database_url: str
    log: Path  # JSON lines, one per request among them


@contextmanager
def serving(env: dict[str, str], log: Path) -> Iterator[str]:
    """`ebbtide serve` with `env` over this process's environment (minus any database URL);
    yields its base URL, then stops it and checks it shut down cleanly."""
    port = free_loopback_port()
    full_env = {k: v for k, v in os.environ.items() if k not in DATABASE_VARIABLES}
    full_env.update(HOST="127.0.0.1", PORT=str(port), EBBTIDE_LOG__FORMAT="json", **env)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve"],
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(base, process, log)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=60)
    output = log.read_text()
    assert process.returncode == 0 and "Traceback" not in output, output


@contextmanager
def fresh_named_database(test_database_url: str, name: str) -> Iterator[str]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    admin = url_of_database(test_database_url, "postgres")
    url = fresh_database(admin, f"{name}_{worker}")
    try:
        yield url
    finally:
        drop_database(admin, f"{name}_{worker}")


@contextmanager
def live_server(database_url: str, log: Path) -> Iterator[LiveServer]:
    """Serves `database_url` (serve migrates it) with the hash embedder and its recall
    margins (tests/conftest.py: HASH_RECALL)."""
    env = {
        "DATABASE_URL": database_url,
        "EBBTIDE_EMBEDDER__KIND": "hash",
        **{f"EBBTIDE_RECALL__{name.upper()}": str(value) for name, value in HASH_RECALL.items()},
    }
    with serving(env, log) as base:
        yield LiveServer(base, database_url, log)


@contextmanager
def serving_proxy(
    test_database_url: str, name: str, log: Path, timeout_s: float
) -> Iterator[tuple[str, ScriptedUpstream]]:
    """`ebbtide serve` on a fresh database of its own with the scripted upstream on loopback
    behind its proxy (both providers); yields the server's base URL and the upstream."""
    upstream = ScriptedUpstream()
    with (
        serve_in_thread(upstream) as upstream_base,
        fresh_named_database(test_database_url, name) as url,
    ):
        env = {
            "DATABASE_URL": url,
            "EBBTIDE_EMBEDDER__KIND": "hash",
            "EBBTIDE_PROXY__OPENAI_BASE_URL": f"{upstream_base}/v1",
            "EBBTIDE_PROXY__ANTHROPIC_BASE_URL": upstream_base,
            "EBBTIDE_PROXY__TIMEOUT_S": str(timeout_s),
        }
        with serving(env, log) as base:
            yield base, upstream
