"""The OpenAI- and Anthropic-compatible endpoints (docs/PROXY.md): an unmodified SDK points
its base URL here and context management happens on the way to the model.

Chat Completions, Responses and Messages calls are turns; the model list and Anthropic's
token count pass through untouched. Ebbtide's own refusals (no session, a bad message, an
unknown model, a limit) answer before anything is forwarded, in the provider's error shape
(app.api.errors); the upstream's answers, errors included, come back with its status, the
headers a client reads, and its body.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Depends, FastAPI, Header, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.json_schema import models_json_schema

from app.api.deps import proxy_tenant, service_context
from app.api.errors import ERROR_RESPONSES
from app.api.message_schemas import (
    AnthropicMessage,
    OpenAIMessage,
    ResponsesItem,
    SystemTextBlock,
)
from app.api.routes import check_limits
from app.api.schemas import (
    SESSION_ID_PATTERN,
    anthropic_system,
    read_messages,
    system_from_leading,
)
from app.core.errors import InvalidSessionId, MissingSession, UnsupportedParameter
from app.core.formats import SystemPrompt, leading_system
from app.core.messages import Format, JsonObject, Message
from app.core.proxy import (
    FORWARDED_HEADERS,
    Provider,
    ProxyRoute,
    UpstreamReply,
    relayed_headers,
)
from app.core.results import RecallMode
from app.services.context import ServiceContext
from app.services.proxy import (
    PassThrough,
    PreparedCall,
    ProxyCall,
    forward,
    open_stream,
    pass_through,
    prepare_call,
    relay,
)
from app.services.shared_calls import SharedAnswer, call_digest
from app.services.throttle import CallKind

PROXY_PREFIX = "/v1/"
router = APIRouter(prefix="/v1", tags=["proxy"])

Context = Annotated[ServiceContext, Depends(service_context)]
Tenant = Annotated[str, Depends(proxy_tenant)]
SessionHeader = Annotated[
    str | None,
    Header(
        alias="X-Ebbtide-Session",
        max_length=256,
        description="The session; without it, `user` (OpenAI) or `metadata.user_id` (Anthropic).",
    ),
]
WindowHeader = Annotated[
    int | None,
    Header(
        alias="X-Ebbtide-Context-Window",
        ge=256,
        le=100_000_000,
        description="The model's context window; without it, the model table's.",
    ),
]
RecallHeader = Annotated[
    Literal["auto", "off", "force"], Header(alias="X-Ebbtide-Recall", description="Recall mode.")
]


class ChatCompletionsBody(BaseModel):
    """The fields of a Chat Completions request the proxy reads; every other field is
    forwarded as it came."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=256)
    messages: list[OpenAIMessage] = Field(min_length=1)
    tools: list[JsonObject] | None = None
    stream: bool | None = None
    user: str | None = None
    safety_identifier: str | None = None  # OpenAI's successor of `user`
    n: int | None = None

    def read(self) -> tuple[SystemPrompt | None, list[Message]]:
        if self.n is not None and self.n > 1:
            raise UnsupportedParameter(
                "n > 1 is not supported through Ebbtide: a turn records one reply, and the "
                "next call carries the one the application kept; send n separate calls",
                field="n",
            )
        return system_from_leading(Format.OPENAI, None, read_messages(Format.OPENAI, self.messages))

    def session_fallback(self) -> tuple[str | None, str]:
        return _session_fallback(self.user, self.safety_identifier)


def _session_fallback(user: str | None, safety_identifier: str | None) -> tuple[str | None, str]:
    """The session a client that cannot set headers names (OpenAI's `user`, or its successor
    `safety_identifier`), and the field it came in."""
    if user is None and safety_identifier is not None:
        return safety_identifier, "safety_identifier"
    return user, "user"


class ResponsesBody(BaseModel):
    """The fields of a Responses request the proxy reads; every other field is forwarded.
    `input` is the whole conversation (a string is one user message); `instructions` is the
    system prompt."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=256)
    input: list[ResponsesItem] = Field(min_length=1)
    instructions: str | None = None
    tools: list[JsonObject] | None = None
    stream: bool | None = None
    user: str | None = None
    safety_identifier: str | None = None
    previous_response_id: str | None = None
    conversation: str | JsonObject | None = None

    @field_validator("input", mode="before")
    @classmethod
    def _one_user_message(cls, value: object) -> object:
        return [{"role": "user", "content": value}] if isinstance(value, str) else value

    def read(self) -> tuple[SystemPrompt | None, list[Message]]:
        for name in ("previous_response_id", "conversation"):
            if getattr(self, name) is not None:
                raise UnsupportedParameter(
                    f"{name} is not supported through Ebbtide: it keeps the conversation "
                    "itself, so send the whole conversation as `input` on every call",
                    field=name,
                )
        items = read_messages(Format.RESPONSES, self.input)
        if self.instructions is not None and leading_system(items):
            # Both are the provider's: `instructions` is C0, the items stay where they are.
            return SystemPrompt(self.instructions), items
        return system_from_leading(Format.RESPONSES, self.instructions, items)

    def session_fallback(self) -> tuple[str | None, str]:
        return _session_fallback(self.user, self.safety_identifier)


class AnthropicMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    user_id: str | None = None


class MessagesBody(BaseModel):
    """The fields of a Messages request the proxy reads; every other field is forwarded."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=256)
    messages: list[AnthropicMessage] = Field(min_length=1)
    system: str | list[SystemTextBlock] | None = None
    tools: list[JsonObject] | None = None
    stream: bool | None = None
    metadata: AnthropicMetadata | None = None

    def read(self) -> tuple[SystemPrompt | None, list[Message]]:
        return anthropic_system(self.system), read_messages(Format.ANTHROPIC, self.messages)

    def session_fallback(self) -> tuple[str | None, str]:
        return (self.metadata.user_id if self.metadata else None), "metadata.user_id"


Body = TypeVar("Body", ChatCompletionsBody, MessagesBody, ResponsesBody)
# The routes read their bodies themselves (a large one is parsed off the event loop); the
# OpenAPI document names the models all the same (app.main adds their schemas).
BODY_MODELS: tuple[type[BaseModel], ...] = (ChatCompletionsBody, MessagesBody, ResponsesBody)


def _documented_body(model: type[BaseModel]) -> JsonObject:
    schema = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"content": {"application/json": {"schema": schema}}, "required": True}}


def document_bodies(app: FastAPI) -> None:
    """Adds the bodies' schemas to the app's OpenAPI components, as FastAPI would for a route
    that declares its body."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            _, found = models_json_schema(
                [(model, "validation") for model in BODY_MODELS],
                ref_template="#/components/schemas/{model}",
            )
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, definition in found.get("$defs", {}).items():
                components.setdefault(name, definition)
            return schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


Parsed = TypeVar("Parsed", bound=BaseModel)


def _validated(model: type[Parsed], raw: bytes) -> Parsed:
    """The body, or the validation error FastAPI raises for a body it parses itself."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as error:
        raise _as_request_error(error) from None


def _as_request_error(error: ValidationError) -> RequestValidationError:
    """FastAPI's error, each problem located in the body, as for a body it parses."""
    problems = [{**p, "loc": ("body", *p["loc"])} for p in error.errors(include_url=False)]
    return RequestValidationError(problems)


def _session(header: str | None, fallback: str | None, fallback_name: str) -> str:
    session = header if header is not None else fallback
    if session is None:
        raise MissingSession(
            f"name the session in the X-Ebbtide-Session header (or in `{fallback_name}`)",
            field="X-Ebbtide-Session",
        )
    if not re.fullmatch(SESSION_ID_PATTERN, session):
        source = "X-Ebbtide-Session" if header is not None else fallback_name
        raise InvalidSessionId(
            f"{source} is not a session id (letters, digits, '.', '_', ':', '-'; "
            "at most 128 characters)",
            field=source,
        )
    return session


def forwarded(body: BaseModel) -> JsonObject:
    """The client's body as it came, but for its messages or input (replaced by the
    prompt)."""
    return body.model_dump(mode="json", exclude_unset=True, exclude={"messages", "input"})


def _credentials(request: Request) -> tuple[tuple[str, str], ...]:
    return tuple(
        (name, request.headers[name]) for name in FORWARDED_HEADERS if name in request.headers
    )


def _ebbtide_headers(prepared: PreparedCall) -> dict[str, str]:
    """What the turn did, for a developer looking at the response."""
    turn = prepared.turn
    headers = {
        "X-Ebbtide-Turn": str(turn.turn),
        "X-Ebbtide-Prompt-Tokens": str(turn.usage.prompt_tokens),
        "X-Ebbtide-Offloaded-Chunks": str(len(turn.offload.chunk_ids)),
    }
    if turn.history is not None:
        headers["X-Ebbtide-History-Added"] = str(turn.history.added)
    return headers


def _as_response(reply: UpstreamReply, extra: dict[str, str]) -> Response:
    return Response(
        reply.body, status_code=reply.status, headers={**relayed_headers(reply.headers), **extra}
    )


async def _answer(ctx: ServiceContext, prepared: PreparedCall) -> Response:
    extra = _ebbtide_headers(prepared)
    if not prepared.request.stream:
        return _as_response(await forward(ctx, prepared), extra)
    stream = await open_stream(ctx, prepared)
    if not 200 <= stream.status < 300:
        try:
            body = await stream.read()
        finally:
            await stream.aclose()
        return _as_response(UpstreamReply(stream.status, stream.headers, body), extra)
    return StreamingResponse(
        relay(ctx, prepared, stream),
        status_code=stream.status,
        headers={**relayed_headers(stream.headers), **extra},
    )


@dataclass(frozen=True)
class CallOptions:
    """What a call's Ebbtide headers ask: the session (or None: the body's fallback), the
    model's window, the recall mode."""

    session: str | None
    context_window: int | None
    recall: RecallMode


def call_options(
    session: SessionHeader = None,
    context_window: WindowHeader = None,
    recall: RecallHeader = "auto",
) -> CallOptions:
    return CallOptions(session, context_window, recall)


Options = Annotated[CallOptions, Depends(call_options)]


@dataclass(frozen=True)
class CallHeaders:
    """What a call says of itself besides its body: route, tenant, session, window, recall."""

    route: ProxyRoute
    tenant: str
    session_id: str
    context_window: int | None
    recall: RecallMode

    @classmethod
    def of(cls, route: ProxyRoute, tenant: str, options: CallOptions, body: Body) -> CallHeaders:
        session_id = _session(options.session, *body.session_fallback())
        return cls(route, tenant, session_id, options.context_window, options.recall)


async def _proxied(
    ctx: ServiceContext,
    request: Request,
    tenant: str,
    route: ProxyRoute,
    model: type[Body],
    options: CallOptions,
) -> Response:
    """The call admitted by the tenant's limits, its turn run (off the event loop when its
    body is large), then the upstream's answer; an identical call in flight answers this one
    instead."""
    raw = await request.body()
    ctx.throttle.admit(tenant, CallKind.PROXY, len(raw))
    async with ctx.throttle.sized(tenant, len(raw)):
        body = await ctx.throttle.run(_validated, model, raw)
        call = CallHeaders.of(route, tenant, options, body)
        digest, led = await _led(ctx, request, body, call)
    if isinstance(led, asyncio.Future):  # an identical call is in flight: its answer is this one's
        shared = await ctx.calls_in_flight.answer_of(led)
        return Response(shared.body, status_code=shared.status, headers=shared.headers)
    try:
        response = await _answer(ctx, led)
    except BaseException as error:
        ctx.calls_in_flight.failed(digest, error)
        raise
    return _shared(ctx, digest, response)


async def _led(
    ctx: ServiceContext, request: Request, body: Body, call: CallHeaders
) -> tuple[str, PreparedCall | asyncio.Future[SharedAnswer]]:
    """The call's digest, and its turn run, or the identical call in flight it waits for.
    The body and its history end here: nothing but the prepared call outlives it."""
    proxy_call, digest = await ctx.throttle.run(_read_call, ctx, request, body, call)
    waiting = ctx.calls_in_flight.joined(digest)
    if waiting is not None:
        return digest, waiting
    ctx.calls_in_flight.lead(digest)
    try:
        return digest, await prepare_call(ctx, proxy_call)
    except BaseException as error:
        ctx.calls_in_flight.failed(digest, error)
        raise


def _read_call(
    ctx: ServiceContext, request: Request, body: Body, call: CallHeaders
) -> tuple[ProxyCall, str]:
    """The call in the one message model, within the limits, and its digest (what makes two
    calls identical: route, tenant, session, body and Ebbtide's headers)."""
    system, history = body.read()
    check_limits(history, ctx, whole=True)
    proxy_call = ProxyCall(
        route=call.route,
        tenant_id=call.tenant,
        session_id=call.session_id,
        model=body.model,
        system=system,
        history=tuple(history),
        body=forwarded(body),
        credentials=_credentials(request),
        tools=body.tools,
        context_window=call.context_window,
        recall=call.recall,
    )
    said = body.model_dump(mode="json", exclude_unset=True)
    headers = {"context_window": call.context_window, "recall": call.recall}
    digest = call_digest(call.route.value, proxy_call.key, {"body": said, "headers": headers})
    return proxy_call, digest


def _shared(ctx: ServiceContext, digest: str, response: Response) -> Response:
    """The response, whose answer the identical calls that came in meanwhile get too: at once,
    or, for a stream, once it has ended."""
    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
    if not isinstance(response, StreamingResponse):
        answer = SharedAnswer(response.status_code, headers, bytes(response.body))
        ctx.calls_in_flight.answered(digest, answer)
        return response
    events = response.body_iterator

    async def teed() -> AsyncIterator[bytes]:
        sent: list[bytes] = []
        try:
            async for chunk in events:
                piece = chunk if isinstance(chunk, bytes) else str(chunk).encode()
                sent.append(piece)
                yield piece
        except BaseException as error:
            ctx.calls_in_flight.failed(digest, error)
            raise
        answer = SharedAnswer(response.status_code, headers, b"".join(sent))
        ctx.calls_in_flight.answered(digest, answer)

    response.body_iterator = teed()
    return response


@router.post(
    "/chat/completions",
    responses={**ERROR_RESPONSES, 502: {"description": "Upstream unreachable"}, 504: {}},
    openapi_extra=_documented_body(ChatCompletionsBody),
)
async def chat_completions(
    request: Request, ctx: Context, tenant: Tenant, options: Options
) -> Response:
    """OpenAI Chat Completions, streamed or not: the whole history in, the session's prompt
    forwarded to `EBBTIDE_PROXY__OPENAI_BASE_URL`, the upstream's answer back."""
    route = ProxyRoute.CHAT_COMPLETIONS
    return await _proxied(ctx, request, tenant, route, ChatCompletionsBody, options)


@router.post(
    "/messages",
    responses={**ERROR_RESPONSES, 502: {"description": "Upstream unreachable"}, 504: {}},
    openapi_extra=_documented_body(MessagesBody),
)
async def messages(request: Request, ctx: Context, tenant: Tenant, options: Options) -> Response:
    """Anthropic Messages, streamed or not: the whole history in, the session's prompt
    forwarded to `EBBTIDE_PROXY__ANTHROPIC_BASE_URL`, the upstream's answer back."""
    return await _proxied(ctx, request, tenant, ProxyRoute.MESSAGES, MessagesBody, options)


@router.post(
    "/responses",
    responses={**ERROR_RESPONSES, 502: {"description": "Upstream unreachable"}, 504: {}},
    openapi_extra=_documented_body(ResponsesBody),
)
async def responses(request: Request, ctx: Context, tenant: Tenant, options: Options) -> Response:
    """OpenAI Responses, streamed or not: the whole conversation as `input` (stateless:
    `previous_response_id` is refused), the session's prompt forwarded to
    `EBBTIDE_PROXY__OPENAI_BASE_URL`, the upstream's answer back, its output recorded."""
    return await _proxied(ctx, request, tenant, ProxyRoute.RESPONSES, ResponsesBody, options)


def _models_provider(request: Request) -> Provider:
    """Both SDKs list models at `/v1/models`: Anthropic's always sends `anthropic-version`."""
    return Provider.ANTHROPIC if "anthropic-version" in request.headers else Provider.OPENAI


async def _passed_through(ctx: ServiceContext, call: PassThrough) -> Response:
    return _as_response(await pass_through(ctx, call), {})


ModelId = Annotated[str, Path(min_length=1, max_length=256)]


@router.get("/models", responses={**ERROR_RESPONSES, 502: {}, 504: {}})
async def models(request: Request, ctx: Context, _: Tenant) -> Response:
    """The upstream's model list, as it answers it (Anthropic's when the call carries
    `anthropic-version`, else OpenAI's)."""
    call = PassThrough("models", _models_provider(request), "models", None, _credentials(request))
    return await _passed_through(ctx, call)


@router.get("/models/{model_id}", responses={**ERROR_RESPONSES, 502: {}, 504: {}})
async def model(request: Request, ctx: Context, _: Tenant, model_id: ModelId) -> Response:
    """One model, as the upstream describes it."""
    provider = _models_provider(request)
    call = PassThrough("models", provider, f"models/{model_id}", None, _credentials(request))
    return await _passed_through(ctx, call)


@router.post("/messages/count_tokens", responses={**ERROR_RESPONSES, 502: {}, 504: {}})
async def count_tokens(request: Request, ctx: Context, tenant: Tenant) -> Response:
    """Anthropic's token count of the body as sent (the whole history, not the window
    Ebbtide would send: nothing of the session is read or written)."""
    raw = await request.body()
    ctx.throttle.admit(tenant, CallKind.PROXY, len(raw))
    body = await ctx.throttle.run(_json_object, raw)
    call = PassThrough(
        "count_tokens", Provider.ANTHROPIC, "messages/count_tokens", body, _credentials(request)
    )
    return await _passed_through(ctx, call)


def _json_object(raw: bytes) -> JsonObject:
    """The body as a JSON object, or the error FastAPI raises for one it cannot parse."""
    return _validated(_AnyObject, raw).model_dump(mode="json")


class _AnyObject(BaseModel):
    model_config = ConfigDict(extra="allow")
