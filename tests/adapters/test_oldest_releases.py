"""The adapters' tests again, in a virtual environment that holds the oldest framework releases
Ebbtide supports (`oldest.txt`: pydantic-ai 2.0, LangChain 1.0, LangGraph 1.0) and no `app`,
against this environment's live server. The environment is made once per requirements file
(`.venv-oldest`, by uv) and kept for the next run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from uv import find_uv_bin

HERE = Path(__file__).resolve().parent
PROJECT_ROOT = HERE.parents[1]
ENVIRONMENT = PROJECT_ROOT / ".venv-oldest"
REQUIREMENTS = HERE / "oldest.txt"
INSTALL_TIMEOUT_S = 600
RUN_TIMEOUT_S = 600


def oldest_environment() -> Path:
    """The environment's Python, (re)made when `oldest.txt` changed."""
    python = ENVIRONMENT / "bin" / "python"
    stamp = ENVIRONMENT / "requirements.txt"
    wanted = REQUIREMENTS.read_text()
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    uv = find_uv_bin()
    for command in (
        [uv, "venv", "--quiet", "--clear", "--python", sys.executable, str(ENVIRONMENT)],
        [uv, "pip", "install", "--quiet", "--python", str(python), "-r", str(REQUIREMENTS)],
    ):
        subprocess.run(command, check=True, timeout=INSTALL_TIMEOUT_S)
    stamp.write_text(wanted)
    return python


def installed(python: Path, package: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    return subprocess.run(
        [str(python), "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_the_adapters_pass_on_the_oldest_supported_releases(ebbtide_url: str) -> None:
    python = oldest_environment()
    assert [installed(python, p) for p in ("pydantic-ai-slim", "langchain", "langgraph")] == [
        "2.0.0",
        "1.0.0",
        "1.0.0",
    ]
    env = {**os.environ, "EBBTIDE_TEST_URL": ebbtide_url, "PYTHONPATH": str(PROJECT_ROOT)}
    env.pop("PYTEST_XDIST_WORKER", None)
    result = subprocess.run(
        [
            str(python),
            "-m",
            "pytest",
            str(HERE),
            "--ignore",
            __file__,
            "--confcutdir",
            str(HERE),  # the suite's own conftest imports `app`, absent there
            "-p",
            "no:cacheprovider",
            "-q",
        ],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert " passed" in output and "skipped" not in output, output
