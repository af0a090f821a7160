"""Identical proxy calls in flight at once share one answer (docs/PROXY.md).

A client that sends the same call again before the first is answered (a retry on a slow
reply, parallel workers of one session) would otherwise have each copy go upstream and each
reply stored: eight calls, eight assistant messages in one turn. While a call runs, its digest
(route, tenant, session and the whole body) is an implicit idempotency key: a copy that comes
in meanwhile waits for the first and gets its answer (status, headers and body; a streamed
answer whole, once it has ended); nothing of the copy goes upstream or is stored. Once the
first is answered the key is gone, and the same call again is a new call, as a client means
it. Within one process: replicas share nothing here (route a session to one replica). A
first call whose answer never comes (its client left before a stream was read) is taken for
lost after `proxy.shared_wait_s`: its copies get a 504 and the next copy goes upstream.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.core.errors import DomainError, UpstreamTimeout, UpstreamUnavailable
from app.core.messages import JsonObject


@dataclass(frozen=True)
class SharedAnswer:
    """An answer as its copies get it."""

    status: int
    headers: dict[str, str]
    body: bytes


def call_digest(route: str, session_key: str, body: JsonObject) -> str:
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(f"{route}\n{session_key}\n{canonical}".encode()).hexdigest()


def _retrieved(future: asyncio.Future[SharedAnswer]) -> None:
    """Marks a failure as seen even when no copy waited for it."""
    if not future.cancelled():
        future.exception()


class CallsInFlight:
    def __init__(
        self, max_wait_s: float = 900.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_wait_s = max_wait_s
        self._clock = clock
        self._answers: dict[str, tuple[asyncio.Future[SharedAnswer], float]] = {}

    def joined(self, digest: str) -> asyncio.Future[SharedAnswer] | None:
        """The answer to wait for when an identical call is in flight (None: lead)."""
        entry = self._answers.get(digest)
        if entry is None:
            return None
        if self._clock() - entry[1] > self.max_wait_s:  # lost: the next copy leads
            self.failed(digest, TimeoutError())
            return None
        return entry[0]

    async def answer_of(self, waiting: asyncio.Future[SharedAnswer]) -> SharedAnswer:
        """The first call's answer, waited for at most `max_wait_s`."""
        try:
            return await asyncio.wait_for(asyncio.shield(waiting), timeout=self.max_wait_s)
        except TimeoutError as error:
            raise UpstreamTimeout(
                "the identical call this one joined gave no answer in time"
            ) from error

    def lead(self, digest: str) -> None:
        now = self._clock()
        for lost in [
            d for d, (_, started) in self._answers.items() if now - started > self.max_wait_s
        ]:
            self.failed(lost, TimeoutError())  # never answered: not kept for good
        future: asyncio.Future[SharedAnswer] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieved)
        self._answers[digest] = (future, self._clock())

    def _take(self, digest: str) -> asyncio.Future[SharedAnswer] | None:
        entry = self._answers.pop(digest, None)
        return entry[0] if entry is not None else None

    def answered(self, digest: str, answer: SharedAnswer) -> None:
        future = self._take(digest)
        if future is not None and not future.done():
            future.set_result(answer)

    def failed(self, digest: str, error: BaseException) -> None:
        """The copies fail as the first did: with its own error when it is the service's,
        else as an upstream that did not answer (the first was cut or cancelled)."""
        future = self._take(digest)
        if future is None or future.done():
            return
        if not isinstance(error, DomainError):
            error = UpstreamUnavailable("the identical call this one joined ended unanswered")
        future.set_exception(error)
