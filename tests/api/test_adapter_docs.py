"""docs/ADAPTERS.md cannot rot: each of its Python examples runs as a program of its own
against a real `ebbtide serve`, the scripted upstream behind its proxy, and must exit 0."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.bench.upstream import ScriptedUpstream

ADAPTERS = Path(__file__).parents[2] / "docs" / "ADAPTERS.md"
EXAMPLE = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
EXAMPLE_TIMEOUT_S = 120


def examples() -> list[str]:
    return EXAMPLE.findall(ADAPTERS.read_text())


def test_the_page_has_an_example_for_every_way_in() -> None:
    found = "\n".join(examples())
    for way in ("OpenAI(", "Anthropic(", "EbbtideWindow(", "EbbtideMiddleware(", "pre_model_hook("):
        assert way in found, way
    assert len(examples()) == 7


@pytest.mark.parametrize("index", range(len(examples())))
def test_each_example_runs(
    live_proxy: tuple[str, ScriptedUpstream], tmp_path: Path, index: int
) -> None:
    base, _ = live_proxy
    program = tmp_path / f"example_{index}.py"
    program.write_text(examples()[index])
    done = subprocess.run(
        [sys.executable, str(program)],
        env={**os.environ, "EBBTIDE_URL": base},
        capture_output=True,
        text=True,
        timeout=EXAMPLE_TIMEOUT_S,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert done.stdout.strip(), "every example prints what it got"
