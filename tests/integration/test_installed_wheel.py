"""The package as the Docker image installs it: the wheel built from this tree, put into a
fresh virtualenv outside the tree on the locked service packages (requirements/run.txt, which
must satisfy the wheel's declared dependencies), serves from an empty folder (its own
embedded Postgres, migrations read from inside the package) until a turn answers 200 and the
inspector's page renders."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
from uv import find_uv_bin

from app.loopback import free_loopback_port, wait_until_ready
from tests.conftest import PROJECT_ROOT

INSTALL_TIMEOUT_S = 900
EVAL_SETS = (
    "from app.evaluation.hard_set import hard_needles; "
    "from app.evaluation.stated_facts import load_set; "
    "print(len(hard_needles()), len(load_set()))"
)


def run(*command: str | Path, cwd: Path | None = None) -> None:
    subprocess.run([str(part) for part in command], cwd=cwd, check=True, timeout=INSTALL_TIMEOUT_S)


def test_the_built_wheel_installs_and_serves_a_turn_from_an_empty_folder(tmp_path: Path) -> None:
    dist, venv, empty = tmp_path / "dist", tmp_path / "venv", tmp_path / "empty"
    empty.mkdir()
    uv = find_uv_bin()
    run(uv, "build", "--quiet", "--wheel", "--out-dir", dist, PROJECT_ROOT)
    run(uv, "venv", "--quiet", "--python", sys.executable, venv)
    (wheel,) = dist.glob("ebbtide-*.whl")
    into = ("--quiet", "--python", venv / "bin" / "python")
    run(uv, "pip", "install", *into, "-r", PROJECT_ROOT / "requirements" / "run.txt")
    run(uv, "pip", "install", *into, "--no-deps", wheel)
    run(uv, "pip", "check", *into)  # the lock holds everything the wheel declares

    port = free_loopback_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "EBBTIDE_DATABASE_URL", "PYTHONPATH", "VIRTUAL_ENV"}
    }
    env.update(HOST="127.0.0.1", PORT=str(port), EBBTIDE_DATA_DIR=str(tmp_path / "data"))
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [venv / "bin" / "ebbtide", "serve"], cwd=empty, env=env, stdout=out, stderr=out
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(base, server, log)
        assert httpx.get(f"{base}/healthz").json() == {"status": "ok"}
        body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}
        turn = httpx.post(f"{base}/sessions/installed/turn", json=body, timeout=60)
        assert turn.status_code == 200, turn.text
        assert turn.json()["messages"][-1]["content"] == "hello"
        # the inspector's templates and static files ship inside the package
        page = httpx.get(f"{base}/ui/sessions/installed", timeout=30)
        assert page.status_code == 200 and 'id="budget-chart"' in page.text
        assert httpx.get(f"{base}/ui/static/inspector.js").status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert list(empty.iterdir()) == []  # nothing written where it was started
    assert "Traceback" not in log.read_text(), log.read_text()
    # `ebbtide eval`'s sets ship inside the package too
    sets = subprocess.run(
        [venv / "bin" / "python", "-c", EVAL_SETS],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    hard, facts = map(int, sets.stdout.split())
    assert hard > 0 and facts > 0, sets.stdout
