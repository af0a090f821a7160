"""Each tenant's limits (app/services/throttle.py): rates per minute answered 429 with
Retry-After and nothing written, and large calls in a line of their own whose heavy steps run
on the worker threads."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import httpx
import pytest

from app.core.errors import LargeCallsWaiting
from app.core.facts import content_tokens
from app.core.lexical import term_set
from app.core.pace import current_loop_pacer, current_pacer
from app.main import create_app
from app.services.auth import create_key
from app.services.context import ServiceContext
from app.services.throttle import (
    CACHES_LARGE_CALLS_FILL,
    LoopStepAside,
    StepAside,
    Throttle,
)
from app.settings import ThrottleSettings
from app.store.models import DEFAULT_TENANT
from tests.api.proxy_helpers import Proxy
from tests.builders import turn_body, user

FIRST = turn_body(user("Only ship from the Suzhou warehouse."), model="gpt-4o")
NEXT = turn_body(user("And the carrier is Kuehne."))


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def two_tenants(ctx: ServiceContext) -> tuple[dict[str, str], dict[str, str]]:
    acme = await create_key(ctx, "acme", ["memory:read", "memory:write"])
    globex = await create_key(ctx, "globex", ["memory:read", "memory:write"])
    return bearer(acme), bearer(globex)


async def test_a_tenant_over_its_turns_per_minute_gets_429_and_nothing_is_written(
    ctx: ServiceContext, client: httpx.AsyncClient
) -> None:
    ctx.throttle = Throttle(ThrottleSettings(turns_per_minute=3))
    acme, globex = await two_tenants(ctx)
    for body in (FIRST, NEXT, NEXT):
        assert (await client.post("/sessions/s/turn", json=body, headers=acme)).status_code == 200
    refused = await client.post("/sessions/s/turn", json=NEXT, headers=acme)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "rate_limited" and "3 turn calls a minute" in error["message"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert int(refused.headers["Retry-After"]) == error["details"]["retry_after_s"]
    status = await client.get("/sessions/s/status", headers=acme)
    assert status.json()["turns"] == 3
    # Another tenant's calls are its own.
    assert (await client.post("/sessions/s/turn", json=FIRST, headers=globex)).status_code == 200
    metrics = (await client.get("/metrics")).text
    assert 'ebbtide_throttled_total{limit="turn"}' in metrics


async def test_bytes_per_minute_count_every_turn_of_the_tenant(
    ctx: ServiceContext, client: httpx.AsyncClient
) -> None:
    ctx.throttle = Throttle(ThrottleSettings(bytes_per_minute=600))
    acme, _ = await two_tenants(ctx)
    long_turn = turn_body(user("word " * 60), model="gpt-4o")  # about 400 bytes
    assert (await client.post("/sessions/a/turn", json=long_turn, headers=acme)).status_code == 200
    refused = await client.post("/sessions/b/turn", json=long_turn, headers=acme)
    assert refused.status_code == 429
    assert "600 bytes a minute" in refused.json()["error"]["message"]
    assert (await client.get("/sessions/b/status", headers=acme)).status_code == 404


async def test_proxy_calls_over_the_rate_never_reach_the_upstream(proxy: Proxy) -> None:
    proxy.ctx.throttle = Throttle(ThrottleSettings(proxy_calls_per_minute=2))
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Name a prime."}]}
    headers = {"X-Ebbtide-Session": "p1"}
    for _ in range(2):
        answer = await proxy.http.post("/v1/chat/completions", json=body, headers=headers)
        assert answer.status_code == 200
    refused = await proxy.http.post("/v1/chat/completions", json=body, headers=headers)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"
    assert "Retry-After" in refused.headers
    assert len(proxy.upstream.seen) == 2


def history(messages: int) -> list[dict[str, Any]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"Step {i}: ship pallet {i} from the Suzhou warehouse by the northern "
            "route once the customs papers are signed and the carrier has confirmed.",
        }
        for i in range(messages)
    ]


async def test_a_large_proxy_call_answers_as_a_small_one_does(proxy: Proxy) -> None:
    """The same history as a large call (its steps on the worker threads) and as a small one:
    the same prompt goes upstream and the same messages are stored."""
    # Computed on the first recall within the embed timeout, else left for a later one: on a
    # loaded machine the first call would rank without it and the second with it.
    assert await proxy.ctx.question_centroid.vector(timeout_s=120) is not None
    sent = []
    for session, large_from in (("small", 10**9), ("large", 1)):
        proxy.ctx.throttle = Throttle(ThrottleSettings(large_body_bytes=large_from))
        body = {"model": "gpt-4o", "messages": history(41)}
        headers = {"X-Ebbtide-Session": session, "X-Ebbtide-Context-Window": "1024"}
        answer = await proxy.http.post("/v1/chat/completions", json=body, headers=headers)
        assert answer.status_code == 200, answer.text
        assert answer.headers["X-Ebbtide-History-Added"] == "41"
        sent.append(proxy.upstream.last().body["messages"])
    assert sent[0] == sent[1]
    assert int(answer.headers["X-Ebbtide-Offloaded-Chunks"]) > 0


async def test_every_request_in_progress_is_traffic_but_a_large_calls_own(
    ctx: ServiceContext,
) -> None:
    app = create_app(context=ctx)
    traffic = ctx.throttle.traffic

    async def probe() -> dict[str, bool]:
        busy_as_a_request = traffic.busy
        async with ctx.throttle.large_call("acme"):
            busy_as_a_large_call = traffic.busy
        return {"request": busy_as_a_request, "large_call": busy_as_a_large_call}

    app.add_api_route("/probe-traffic", probe)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://ebbtide") as http:
        seen = (await http.get("/probe-traffic")).json()
    assert seen == {"request": True, "large_call": False}
    assert not traffic.busy  # the request has ended


def _priority() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


async def test_a_large_calls_work_runs_off_the_event_loop_and_a_small_ones_does_not() -> None:
    throttle = Throttle(ThrottleSettings(worker_nice=7))
    try:
        assert await throttle.run(threading.current_thread) is threading.main_thread()
        async with throttle.large_call("acme"):
            worker = await throttle.run(threading.current_thread)
            worker_priority = await throttle.run(_priority)
        assert worker is not threading.main_thread()
        assert worker.name.startswith("large-call")
        # With every core busy, the loop's own requests get one first.
        assert worker_priority == _priority() + 7
    finally:
        throttle.close()


async def test_a_large_calls_steps_step_aside_and_a_small_ones_do_not() -> None:
    paced = Throttle(ThrottleSettings())
    unpaced = Throttle(ThrottleSettings(step_aside_wait_ms=0))
    try:
        assert await paced.run(current_pacer) is None
        assert current_loop_pacer() is None
        async with paced.large_call("acme"):
            assert isinstance(await paced.run(current_pacer), StepAside)
            assert isinstance(current_loop_pacer(), LoopStepAside)  # its writes on the loop
        assert current_loop_pacer() is None
        async with unpaced.large_call("acme"):
            assert await unpaced.run(current_pacer) is None
            assert current_loop_pacer() is None
    finally:
        paced.close()
        unpaced.close()


async def test_after_the_last_large_call_the_caches_it_filled_are_emptied() -> None:
    # Throttles of earlier tests on this same event loop may still have a give-back due.
    await asyncio.sleep(ThrottleSettings().give_back_after_s + 0.1)
    throttle = Throttle(ThrottleSettings(give_back_after_s=0.05))
    try:
        async with throttle.large_call("acme"):
            await throttle.run(term_set, "the carrier's invoice for the warehouse")
            await throttle.run(content_tokens, "only the southern warehouse")
            async with throttle.large_call("globex"):
                pass
            await asyncio.sleep(0.2)  # acme's call is still in progress: nothing is emptied
            assert term_set.cache_info().currsize > 0
        for _ in range(100):
            if not any(cache.cache_info().currsize for cache in CACHES_LARGE_CALLS_FILL):
                break
            await asyncio.sleep(0.05)
        assert [cache.cache_info().currsize for cache in CACHES_LARGE_CALLS_FILL] == [0, 0, 0]
    finally:
        throttle.close()


async def test_a_tenants_large_calls_wait_in_a_line_of_their_own() -> None:
    throttle = Throttle(
        ThrottleSettings(large_calls_per_tenant=1, large_calls_waiting_per_tenant=1)
    )
    first_in, release = asyncio.Event(), asyncio.Event()
    order: list[str] = []

    async def call(tenant: str, name: str) -> None:
        async with throttle.large_call(tenant):
            order.append(name)
            first_in.set()
            await release.wait()

    first = asyncio.create_task(call("acme", "acme 1"))
    await first_in.wait()
    second = asyncio.create_task(call("acme", "acme 2"))
    await asyncio.sleep(0)  # the second is in line now
    with pytest.raises(LargeCallsWaiting) as refused:
        async with throttle.large_call("acme"):
            pass
    assert refused.value.details["retry_after_s"] == 10
    # Another tenant does not wait behind acme's line.
    async with throttle.large_call("globex"):
        order.append("globex")
    assert order == ["acme 1", "globex"]
    release.set()
    await asyncio.gather(first, second)
    assert order == ["acme 1", "globex", "acme 2"]
    async with throttle.large_call("acme"):  # the line is empty again
        order.append("acme 3")
    throttle.close()


async def test_a_large_proxy_call_past_the_tenants_line_gets_429(proxy: Proxy) -> None:
    proxy.ctx.throttle = Throttle(
        ThrottleSettings(large_body_bytes=1, large_calls_waiting_per_tenant=0)
    )
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Name a prime."}]}
    async with proxy.ctx.throttle.large_call(DEFAULT_TENANT):  # its one slot is taken
        refused = await proxy.http.post(
            "/v1/chat/completions", json=body, headers={"X-Ebbtide-Session": "p1"}
        )
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "too_many_large_calls"
    assert refused.headers["Retry-After"] == "10"
    assert proxy.upstream.seen == [] and await proxy.stored("p1") == []
