"""`ebbtide serve` as `make run` starts it: embedded Postgres, migrations, HTTP on loopback."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.cli import main, serve_settings
from app.loopback import free_loopback_port, wait_until_ready
from tests.api.live import DATABASE_VARIABLES, LiveServer, serving
from tests.conftest import make_settings


def test_serve_starts_embedded_postgres_migrates_and_answers_turns(tmp_path: Path) -> None:
    with serving({"EBBTIDE_DATA_DIR": str(tmp_path / "data")}, tmp_path / "serve.log") as base:
        response = httpx.post(
            f"{base}/sessions/e2e/turn",
            timeout=30,
            json={"messages": [{"role": "user", "content": "只查华东仓"}], "model": "qwen-plus"},
        )
        assert response.status_code == 200, response.text
        assert response.json()["usage"]["context_window"] == 131_072
        assert (tmp_path / "data" / "pg" / "PG_VERSION").exists()
        # development mode (no key): the interactive docs are served
        assert httpx.get(f"{base}/docs").status_code == 200
        assert httpx.get(f"{base}/openapi.json").status_code == 200
        assert httpx.get(f"{base}/ui/").status_code == 200
    said = (tmp_path / "serve.log").read_text()
    data = tmp_path.resolve() / "data" / "pg"
    for line in (
        f"ebbtide: data: embedded Postgres in {data}",
        "ebbtide: API keys off (development mode, loopback only)",
        "ebbtide: embedder multilingual-e5-small-q4 (local); offloads queue their embedding for a "
        "worker in this process",
        "ebbtide: proxy: /v1/chat/completions to https://api.openai.com/v1, /v1/messages to "
        "https://api.anthropic.com",
        f"ebbtide: inspector {base}/ui/, API docs {base}/docs",
        f"ebbtide: serving on {base}",
    ):
        assert line in said, line
    engine_line = next(x for x in said.splitlines() if x.startswith('ebbtide: {"engine"'))
    engine = json.loads(engine_line.removeprefix("ebbtide: "))["engine"]  # as /readyz says it
    assert engine["postgres"].startswith("18.") and engine["lexical"] == "tsvector"
    # pgserver's initdb output, its pg_ctl calls and alembic's plugin lines stay out
    for chatter in ("initdb", "Running commandline", "setup plugin", "XDG_RUNTIME_DIR"):
        assert chatter not in said, chatter


def test_with_keys_the_docs_and_the_schema_are_not_served(
    keys_and_server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, _ = keys_and_server
    for path in ("/docs", "/redoc", "/openapi.json"):
        response = httpx.get(f"{live.base}{path}")
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "not_found"
    said = live.log.read_text()
    assert "ebbtide: API keys on: every call needs one" in said
    assert f"ebbtide: inspector {live.base}/ui/, API docs off (EBBTIDE_DOCS=true)" in said


def test_serve_options_take_the_place_of_the_environment(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    shown = capsys.readouterr().out
    assert all(option in shown for option in ("--host", "--port", "--workers", "--data-dir"))
    settings = make_settings()
    args = argparse.Namespace(host="0.0.0.0", port=9001, data_dir=None, workers=3)
    chosen = serve_settings(settings, args)
    assert (chosen.host, chosen.port, chosen.data_dir) == ("0.0.0.0", 9001, settings.data_dir)
    assert chosen.workers == 3
    with pytest.raises(SystemExit):
        main(["serve", "--workers", "0"])
    assert "must be 1 or more" in capsys.readouterr().err


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_stops_the_server_and_its_workers_quietly(tmp_path: Path, workers: int) -> None:
    port = free_loopback_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k not in DATABASE_VARIABLES}
    env.update(EBBTIDE_DATA_DIR=str(tmp_path / "data"), EBBTIDE_EMBEDDER__KIND="hash")
    command = [sys.executable, "-m", "app.cli", "serve", "--port", str(port)]
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        # its own process group, as a terminal's foreground job: Ctrl+C reaches all of it
        process = subprocess.Popen(
            [*command, "--workers", str(workers)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until_ready(base, process, log)
        ready = wait_for_lines(log, "ready", workers) if workers > 1 else []
        for i in range(4):  # answered by whichever worker takes the connection
            turn = {"messages": [{"role": "user", "content": f"q{i}"}], "model": "gpt-4o"}
            response = httpx.post(f"{base}/sessions/c{i}/turn", json=turn, timeout=30)
            assert response.status_code == 200, response.text
        alive = [process.pid, *(int(line.split()[2]) for line in ready)]
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    said = log.read_text()
    assert process.returncode == 0, said
    assert "Traceback" not in said and "KeyboardInterrupt" not in said, said
    assert not any(running(pid) for pid in alive)


def wait_for_lines(log: Path, word: str, count: int, timeout_s: float = 60) -> list[str]:
    """The log's `ebbtide: worker <pid> ready` lines, once there are `count` of them."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [x for x in log.read_text().splitlines() if x.startswith("ebbtide: worker")]
        if len([x for x in found if x.endswith(word)]) >= count:
            return found
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} workers said they were {word}:\n{log.read_text()}")


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
