"""What long commands show while they work (app/console.py)."""

from __future__ import annotations

import io

from app.console import ConsoleProgress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_each_stage_says_when_it_starts_and_ends() -> None:
    out = io.StringIO()
    with ConsoleProgress(out, every_s=3600) as progress:
        progress("re-encrypt messages", 0, 250)
        progress("re-encrypt messages", 200)
        progress("re-encrypt messages", 50)
        progress("rebuild the lexical index", 0)
        progress("rebuild the lexical index", 7)
    lines = [line.rsplit(" (", 1)[0] for line in out.getvalue().splitlines()]
    assert lines == [
        "ebbtide: re-encrypt messages: 0 of 250 started",
        "ebbtide: re-encrypt messages: 250 of 250 done",
        "ebbtide: rebuild the lexical index: 0 started",
        "ebbtide: rebuild the lexical index: 7 done",
    ]


def test_off_a_terminal_a_long_stage_says_how_far_it_got_now_and_then() -> None:
    out = io.StringIO()
    with ConsoleProgress(out, every_s=0) as progress:
        progress("embed queued chunks", 0, 8)
        progress("embed queued chunks", 4)
    assert "ebbtide: embed queued chunks: 4 of 8 …" in out.getvalue()


def test_on_a_terminal_a_stage_is_a_bar_that_learns_its_total() -> None:
    out = Terminal()
    with ConsoleProgress(out) as progress:
        progress("purge idle sessions", 0)
        progress("purge idle sessions", 3, 12)
        assert progress.bar is not None and progress.bar.total == 12 and progress.bar.n == 3
    assert "ebbtide: purge idle sessions" in out.getvalue() and progress.bar is None
