"""Identical proxy calls in flight (app/services/shared_calls.py): the copies fail as the first
did, and a cut or cancelled first call fails them as an upstream that did not answer."""

from __future__ import annotations

import asyncio

import pytest

from app.core.errors import UnknownModel, UpstreamTimeout, UpstreamUnavailable
from app.services.shared_calls import CallsInFlight, SharedAnswer, call_digest


def test_a_digest_is_of_the_route_session_and_whole_body() -> None:
    one = call_digest("chat_completions", "local/s", {"model": "a", "messages": [1]})
    assert one == call_digest("chat_completions", "local/s", {"messages": [1], "model": "a"})
    assert one != call_digest("chat_completions", "local/t", {"model": "a", "messages": [1]})
    assert one != call_digest("messages", "local/s", {"model": "a", "messages": [1]})


async def test_copies_get_the_answer_or_the_failure_of_the_first() -> None:
    calls = CallsInFlight()
    for failure, expected in (
        (UnknownModel("no window"), UnknownModel),
        (asyncio.CancelledError(), UpstreamUnavailable),
    ):
        calls.lead("d")
        waiting = calls.joined("d")
        assert waiting is not None
        calls.failed("d", failure)
        with pytest.raises(expected):
            await waiting
        assert calls.joined("d") is None
    calls.lead("d")
    waiting = calls.joined("d")
    assert waiting is not None
    calls.answered("d", SharedAnswer(200, {}, b"ok"))
    assert (await waiting).body == b"ok"
    calls.answered("d", SharedAnswer(200, {}, b"late"))  # nobody waits: nothing happens
    calls.failed("d", RuntimeError("late"))
    calls.lead("e")
    calls.failed("e", RuntimeError("nobody waited"))  # seen, never "never retrieved"


async def test_a_first_call_that_never_answers_is_taken_for_lost() -> None:
    now = [0.0]
    calls = CallsInFlight(max_wait_s=0.05, clock=lambda: now[0])
    calls.lead("d")
    waiting = calls.joined("d")
    assert waiting is not None
    with pytest.raises(UpstreamTimeout):  # a copy waits at most max_wait_s
        await calls.answer_of(waiting)
    now[0] = 1.0
    assert calls.joined("d") is None  # past it, the next copy leads
    with pytest.raises(UpstreamUnavailable):
        await waiting


async def test_lost_calls_are_not_kept_for_good() -> None:
    now = [0.0]
    calls = CallsInFlight(max_wait_s=10, clock=lambda: now[0])
    calls.lead("lost")
    now[0] = 11.0
    calls.lead("next")  # a new call sweeps the lost ones
    assert calls.joined("lost") is None and calls.joined("next") is not None
