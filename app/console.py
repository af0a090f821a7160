"""What long commands (`bench`, `reembed`, `purge`, `encryption rotate`) show while they work:
a bar per stage on a terminal, and elsewhere (a log file, CI) a line when a stage starts,
at most every `every_s` seconds while it runs, and when it ends. Always on stderr, so that
stdout keeps only each command's result."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

from tqdm import tqdm


class ConsoleProgress:
    """A `core.ports.Progress` for the terminal; use it as a context manager."""

    def __init__(self, stream: TextIO | None = None, every_s: float = 10.0) -> None:
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self.terminal = self.stream.isatty()
        self.stage: str | None = None
        self.total: int | None = None
        self.done = 0
        self.started = self.said = 0.0
        self.bar: tqdm | None = None

    def __call__(self, stage: str, done: int, total: int | None = None) -> None:
        if stage != self.stage:
            self._finish()
            self._start(stage, total)
        elif total is not None:
            self.total = total
            if self.bar is not None:
                self.bar.total = total
        self.done += done
        if self.bar is not None:
            self.bar.update(done)
        elif time.monotonic() - self.said >= self.every_s:
            self._say("…")

    def _start(self, stage: str, total: int | None) -> None:
        self.stage, self.total, self.done = stage, total, 0
        self.started = self.said = time.monotonic()
        if self.terminal:
            self.bar = tqdm(total=total, desc=f"ebbtide: {stage}", file=self.stream, unit="")
        else:
            self._say("started")

    def _say(self, state: str) -> None:
        count = f"{self.done:,}" + (f" of {self.total:,}" if self.total is not None else "")
        seconds = time.monotonic() - self.started
        self.stream.write(f"ebbtide: {self.stage}: {count} {state} ({seconds:.0f} s)\n")
        self.stream.flush()
        self.said = time.monotonic()

    def _finish(self) -> None:
        if self.stage is None:
            return
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        else:
            self._say("done")
        self.stage = None

    def __enter__(self) -> ConsoleProgress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._finish()
