"""The proxy use case (docs/PROXY.md): an unmodified SDK's call, whole history and all,
becomes a turn; the assembled prompt goes upstream in the call's place; the reply goes back
to the client as the upstream sent it and is recorded as the next turn's first message.

Nothing of a failed call is recorded as a reply: an upstream error, a timeout or a stream
cut before it said it was complete leaves only the turn's new messages stored, and a retry
with the same history adds nothing twice (reconciliation finds them). A reply is recorded
before the client gets its last byte, so the client's next call always finds it stored.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

from app import metrics
from app.core.assemble import PromptFormat
from app.core.errors import DomainError, UpstreamUnavailable
from app.core.formats import SystemPrompt, read_posted
from app.core.messages import JsonObject, Message
from app.core.plan import TurnInput
from app.core.ports import ModelUpstream, UpstreamStream
from app.core.proxy import (
    Provider,
    ProviderReply,
    ProxyRoute,
    UpstreamReply,
    UpstreamRequest,
    provider_reply,
    upstream_body,
)
from app.core.results import RecallMode, TurnResult
from app.core.sse import (
    OpenAIStream,
    SseEvent,
    SseReader,
    StreamedReply,
    ends_stream,
    is_error_event,
    stream_cut_event,
    streamed_reply,
)
from app.core.tokens import count_message
from app.core.transcript import message_digest
from app.core.types import WindowMessage, session_key
from app.services.context import ServiceContext
from app.services.policies import plan_policy
from app.services.sessions import locked_session
from app.services.turns import run_turn
from app.store import events as event_store
from app.store import sessions as session_store

log = logging.getLogger("ebbtide.proxy")


@dataclass(frozen=True)
class ProxyCall:
    """A client's call as the proxy reads it: whose session, the history in the one message
    model, and the body and credentials to forward."""

    route: ProxyRoute
    tenant_id: str
    session_id: str
    model: str
    system: SystemPrompt | None
    history: tuple[Message, ...]
    body: JsonObject  # as the client sent it; its messages are replaced by the prompt
    credentials: tuple[tuple[str, str], ...]
    tools: list[Any] | None = None
    context_window: int | None = None
    recall: RecallMode = "auto"

    @property
    def key(self) -> str:
        return session_key(self.tenant_id, self.session_id)


@dataclass(frozen=True)
class PreparedCall:
    """The turn the call became and the request that goes upstream. `hides_usage_chunk`:
    the proxy asked a stream for its usage, so that chunk is not the client's."""

    call: ProxyCall
    turn: TurnResult
    request: UpstreamRequest
    hides_usage_chunk: bool = False


def _upstream(ctx: ServiceContext) -> ModelUpstream:
    if ctx.upstream is None:
        raise UpstreamUnavailable("this server has no upstream configured for its proxy")
    return ctx.upstream


def _base_url(ctx: ServiceContext, provider: Provider) -> str:
    proxy = ctx.settings.proxy
    return proxy.openai_base_url if provider is Provider.OPENAI else proxy.anthropic_base_url


async def prepare_call(ctx: ServiceContext, call: ProxyCall) -> PreparedCall:
    """Runs the turn: the history reconciled with the transcript, the prompt assembled."""
    turn = await run_turn(
        ctx,
        TurnInput(
            session_id=call.session_id,
            tenant_id=call.tenant_id,
            messages=call.history,
            system=call.system,
            tools=call.tools,
            model=call.model,
            context_window=call.context_window,
            recall=call.recall,
            prompt_format=PromptFormat.of_input(call.route.message_format),
            whole_history=True,
        ),
    )
    body, hides_usage = upstream_body(call.route, call.body, turn.messages, turn.system)
    request = UpstreamRequest(
        url=call.route.upstream_url(_base_url(ctx, call.route.provider)),
        headers=call.credentials,
        body=body,
        stream=body.get("stream") is True,
    )
    # What is left of the call once its turn is run: the history and the body are dropped,
    # so a large call's memory goes back while the upstream answers.
    return PreparedCall(replace(call, history=(), body={}), turn, request, hides_usage)


@dataclass(frozen=True)
class PassThrough:
    """A provider call that is no turn (the model list, a token count): forwarded as it
    came, answered as the upstream answers, nothing recorded."""

    name: str  # for the metrics: `models`, `count_tokens`
    provider: Provider
    path: str  # under the provider's `/v1/`
    body: JsonObject | None  # None: a GET
    credentials: tuple[tuple[str, str], ...]


async def pass_through(ctx: ServiceContext, call: PassThrough) -> UpstreamReply:
    url = call.provider.url(_base_url(ctx, call.provider), call.path)
    request = UpstreamRequest(url=url, headers=call.credentials, body=call.body)
    started = time.perf_counter()
    try:
        reply = await _upstream(ctx).send(request)
    except UpstreamUnavailable as error:
        metrics.count_proxy_call(call.name, error.code.removeprefix("upstream_"))
        raise
    metrics.PROXY_UPSTREAM_SECONDS.labels(route=call.name).observe(time.perf_counter() - started)
    metrics.count_proxy_call(call.name, "passed" if reply.ok else "upstream_error")
    return reply


def _reply_of(route: ProxyRoute, body: bytes) -> ProviderReply:
    try:
        answer = json.loads(body)
    except ValueError:
        return ProviderReply()
    return provider_reply(route, answer)


async def forward(ctx: ServiceContext, prepared: PreparedCall) -> UpstreamReply:
    """Sends the prompt upstream and records the reply; the upstream's answer is returned
    as it came, errors included."""
    route = prepared.call.route
    started = time.perf_counter()
    try:
        reply = await _upstream(ctx).send(prepared.request)
    except UpstreamUnavailable as error:
        metrics.count_proxy_call(route, error.code.removeprefix("upstream_"))
        raise
    metrics.PROXY_UPSTREAM_SECONDS.labels(route=route).observe(time.perf_counter() - started)
    outcome = "upstream_error"
    if reply.ok:
        outcome = await record_reply(ctx, prepared, _reply_of(route, reply.body))
    metrics.count_proxy_call(route, outcome)
    return reply


async def open_stream(ctx: ServiceContext, prepared: PreparedCall) -> UpstreamStream:
    """Opens the upstream's streamed answer: status and headers, the body still to come."""
    route = prepared.call.route
    started = time.perf_counter()
    try:
        stream = await _upstream(ctx).open_stream(prepared.request)
    except UpstreamUnavailable as error:
        metrics.count_proxy_call(route, error.code.removeprefix("upstream_"))
        raise
    metrics.PROXY_UPSTREAM_SECONDS.labels(route=route).observe(time.perf_counter() - started)
    if not 200 <= stream.status < 300:
        metrics.count_proxy_call(route, "upstream_error")
    return stream


async def relay(
    ctx: ServiceContext, prepared: PreparedCall, stream: UpstreamStream
) -> AsyncIterator[bytes]:
    """The upstream's events, each as it came, while the reply is added up; the reply is
    recorded before the event that ends the stream is passed on. A stream cut before it said
    it was complete ends with an error event in the provider's own form (as a provider
    reports a failure mid-stream), so the client's SDK raises instead of taking a partial
    reply for a whole one; nothing of it is recorded."""
    route = prepared.call.route
    reader = SseReader()
    reply = streamed_reply(route.message_format)
    ended = errored = False
    try:
        async for chunk in stream.chunks():
            for event in reader.feed(chunk):
                ended = ended or await _take(ctx, prepared, reply, event)
                errored = errored or is_error_event(event)
                if not (prepared.hides_usage_chunk and OpenAIStream.usage_only(event)):
                    yield event.raw
        rest = reader.rest()
        if rest is not None:
            ended = ended or await _take(ctx, prepared, reply, rest)
            yield rest.raw
        if not ended and reply.complete:  # complete, but the closing event never came
            await _record_streamed(ctx, prepared, reply)
            ended = True
    except UpstreamUnavailable:
        pass  # cut or stalled: told below
    finally:
        await stream.aclose()
    if ended:
        return
    if errored:  # the upstream said why, in its own stream: it needs no word of ours
        metrics.count_proxy_call(route, "upstream_error")
        return
    metrics.count_proxy_call(route, "cut")
    log.warning("proxy stream cut", extra={"route": route.value})
    yield stream_cut_event(route.message_format)


async def _take(
    ctx: ServiceContext, prepared: PreparedCall, reply: StreamedReply, event: SseEvent
) -> bool:
    """Adds the event to the reply; True when it ends the stream (the reply is recorded)."""
    reply.feed(event)
    if not ends_stream(prepared.call.route.message_format, event):
        return False
    await _record_streamed(ctx, prepared, reply)
    return True


async def _record_streamed(
    ctx: ServiceContext, prepared: PreparedCall, reply: StreamedReply
) -> None:
    outcome = await record_reply(ctx, prepared, ProviderReply(reply.posted(), reply.usage))
    metrics.count_proxy_call(prepared.call.route, outcome)


async def record_reply(ctx: ServiceContext, prepared: PreparedCall, reply: ProviderReply) -> str:
    """Stores the reply as the next turn's first messages and lets the provider's usage
    calibrate the session's estimate. A reply that cannot be read or stored is left out
    (the client still gets it, and sends it back with its next call): "unrecorded"."""
    call = prepared.call
    usage = reply.usage
    metrics.observe_provider_usage(usage.prompt_tokens, usage.cached_tokens)
    if not reply.posted:
        return "unrecorded"
    try:
        messages = [read_posted(call.route.message_format, posted) for posted in reply.posted]
    except (KeyError, TypeError, ValueError, AttributeError):
        log.warning("proxy reply unreadable", extra={"route": call.route.value})
        return "unrecorded"
    try:
        await _store_reply(ctx, call, messages, reply)
    except DomainError as error:
        log.warning("proxy reply not stored", extra={"error": error.code})
        return "unrecorded"
    return "recorded"


async def _store_reply(
    ctx: ServiceContext, call: ProxyCall, messages: list[Message], reply: ProviderReply
) -> None:
    usage = reply.usage
    async with ctx.locks.for_session(call.key), ctx.database.transaction() as db:
        row = await locked_session(db, call.tenant_id, call.session_id)
        counter = ctx.for_model(row.model).counter
        items = [
            WindowMessage(
                seq=row.next_seq + offset,
                turn=row.turn_count + 1,
                message=message,
                tokens=count_message(counter, message),
                created_at=ctx.clock(),
                digest=message_digest(message),
            )
            for offset, message in enumerate(messages)
        ]
        await session_store.insert_messages(db, call.key, items)
        row.next_seq += len(items)
        if usage.prompt_tokens is not None and row.last_prompt_estimate:
            row.calibration_ratio = plan_policy(ctx.settings).calibration.follow(
                row.calibration_ratio, usage.prompt_tokens, row.last_prompt_estimate
            )
        session_store.bump_version(row)
        await event_store.record_event(
            db,
            call.key,
            row.turn_count,
            "reply",
            {
                "seq": items[0].seq,
                "messages": len(items),
                "tokens": sum(item.tokens for item in items),
                "observed_prompt_tokens": usage.prompt_tokens,
                "observed_cached_tokens": usage.cached_tokens,
                "estimated_prompt_tokens": row.last_prompt_estimate,
                "calibration_ratio": row.calibration_ratio,
            },
        )
