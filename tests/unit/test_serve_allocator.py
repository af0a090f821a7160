"""`ebbtide serve` runs on the C allocator (app/cli.py `run_on_the_system_allocator`): the
command starts again as the same process with PYTHONMALLOC=malloc and a fixed mmap
threshold, unless the user set them themselves."""

from __future__ import annotations

import os
import subprocess
import sys

# Prints its process id and allocator, then asks for the system allocator: a second line
# shows the command was started again.
PROGRAM = (
    "import os\n"
    "from app.cli import run_on_the_system_allocator\n"
    "print(os.getpid(), os.environ.get('PYTHONMALLOC', 'unset'),\n"
    "      os.environ.get('MALLOC_MMAP_THRESHOLD_', 'unset'), flush=True)\n"
    "run_on_the_system_allocator()\n"
)


def _run(environment: dict[str, str]) -> list[list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [line.split() for line in done.stdout.splitlines()]


OURS = ("PYTHONMALLOC", "MALLOC_MMAP_THRESHOLD_")


def test_the_command_starts_again_in_the_same_process_on_the_c_allocator() -> None:
    environment = {k: v for k, v in os.environ.items() if k not in OURS}
    (first_pid, *first), (second_pid, *second) = _run(environment)
    assert (first, second) == (["unset", "unset"], ["malloc", str(128 * 1024)])
    assert first_pid == second_pid


def test_an_allocator_the_user_chose_is_kept() -> None:
    chosen = {**os.environ, "PYTHONMALLOC": "pymalloc"}
    assert [line[1:] for line in _run(chosen)] == [["pymalloc", os.environ.get(OURS[1], "unset")]]


def test_a_threshold_the_user_chose_is_kept() -> None:
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONMALLOC"}
    environment["MALLOC_MMAP_THRESHOLD_"] = "65536"
    assert [line[1:] for line in _run(environment)][-1] == ["malloc", "65536"]
