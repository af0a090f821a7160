"""One table from domain errors to HTTP, and the single error body renderer.

Every error answers `{"error": {"code", "message", "details"}}`, but on the proxy's routes
(`/v1/…`), which answer in the error shape of the provider the caller's SDK speaks, so that
it raises its own typed error (app.core.proxy.provider_error). Bad input is a 4xx and the
request wrote nothing (validation happens before any write).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.message_schemas import MESSAGE_TAGS
from app.api.schemas import TURN_FORMATS, ErrorBody
from app.core import errors
from app.core.memory_tool import MemoryType
from app.core.proxy import Provider, provider_error
from app.core.types import JsonObject

STATUS_BY_ERROR: dict[type[errors.DomainError], int] = {
    errors.UnknownModel: 422,
    errors.InvalidWindow: 422,
    errors.TurnExceedsBudget: 413,
    errors.InvalidPolicyOverride: 422,
    errors.InvalidTurn: 422,
    errors.UnsupportedParameter: 422,
    errors.OrphanToolResult: 422,
    errors.TooManyMessages: 422,
    errors.OverLimit: 422,
    errors.MessageTooLarge: 413,
    errors.UnsupportedMedia: 422,
    errors.UnreadableBlob: 410,
    errors.RememberTooLong: 413,
    errors.RememberEmpty: 422,
    errors.RateLimited: 429,
    errors.InvalidForget: 422,
    errors.FactsNotCarried: 422,
    errors.ForgetRequestNotFound: 404,
    errors.Unauthenticated: 401,
    errors.Forbidden: 403,
    errors.SessionNotFound: 404,
    errors.ChunkNotFound: 404,
    errors.TurnNotFound: 404,
    errors.BlobNotFound: 404,
    errors.IdempotencyKeyReused: 409,
    errors.ReplayForgotten: 409,
    errors.SessionBusy: 409,
    errors.UnstorableValue: 422,
    errors.DatabaseUnavailable: 503,
    errors.MissingSession: 422,
    errors.InvalidSessionId: 422,
    errors.UpstreamUnavailable: 502,
    errors.UpstreamTimeout: 504,
    # The server cannot read what it stored: its configuration, not the request, is wrong.
    errors.EncryptionKeyMissing: 500,
    errors.EncryptionKeyRejected: 500,
}

ERROR_RESPONSES: dict[int | str, JsonObject] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in (
        (400, "Malformed JSON"),
        (401, "Missing or unknown API key"),
        (403, "The key lacks the scope"),
        (404, "Unknown session, chunk or blob"),
        (409, "Idempotency-Key reused with another body, or the session stayed busy"),
        (413, "Body or message over the size limit, or a turn that cannot fit the budget"),
        (429, "Rate limit reached; retry after details.retry_after_s seconds"),
        (422, "Invalid request"),
        (503, "Database unavailable; retry with the same Idempotency-Key"),
    )
}


PROXY_PATHS = "/v1/"


def provider_of(path: str, headers: Headers) -> Provider | None:
    """Whose error shape a request is answered in: a proxy route's provider (Anthropic's for
    Messages and for any call from its SDK, which always sends `anthropic-version`; OpenAI's
    for the rest), None for Ebbtide's own API."""
    if not path.startswith(PROXY_PATHS):
        return None
    if path.startswith("/v1/messages") or "anthropic-version" in headers:
        return Provider.ANTHROPIC
    return Provider.OPENAI


def error_response(
    status: int,
    code: str,
    message: str,
    details: Any = None,
    provider: Provider | None = None,
) -> JSONResponse:
    details = details or {}
    body = (
        {"error": {"code": code, "message": message, "details": details}}
        if provider is None
        else provider_error(provider, status, code, message, details)
    )
    headers = {"Retry-After": "1"} if status == 503 else None
    if status == 429:
        headers = {"Retry-After": str((details or {}).get("retry_after_s", 1))}
    if status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    return JSONResponse(body, status_code=status, headers=headers)


def status_for(error: errors.DomainError) -> int:
    for cls in type(error).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return 400


def _provider(request: Request) -> Provider | None:
    return provider_of(request.url.path, request.headers)


async def _domain_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, errors.DomainError)
    return error_response(
        status_for(error), error.code, error.message, error.details, _provider(request)
    )


def _field_path(location: tuple[Any, ...]) -> str:
    """The field a validation error names, without the tags pydantic puts in the path for
    the turn's format and for a message's role or item type (they are no fields)."""
    parts = [str(p) for p in location if p != "body"]
    if parts and parts[0] in TURN_FORMATS:
        parts = parts[1:]
    if (
        len(parts) > 2
        and parts[0] == "messages"
        and parts[1].isdigit()
        and parts[2] in MESSAGE_TAGS
    ):
        parts = parts[:2] + parts[3:]
    return ".".join(parts) if parts else "body"


def _memory_type_unknown(item: Any) -> bool:
    """The memory tool's `type` named no command (its union is the one tagged by `type`)."""
    discriminator = (item.get("ctx") or {}).get("discriminator")
    return str(item.get("type", "")).startswith("union_tag_") and discriminator == "'type'"


async def _validation_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    provider = _provider(request)
    problems = [
        {"field": _field_path(tuple(item.get("loc", ()))), "problem": item.get("msg", "")}
        for item in error.errors()
    ]
    if any(item.get("type") == "json_invalid" for item in error.errors()):
        return error_response(
            400, "malformed_json", "the body is not valid JSON", {"problems": problems}, provider
        )
    if any(_memory_type_unknown(item) for item in error.errors()):
        valid = ", ".join(t.value for t in MemoryType)
        return error_response(
            422,
            "unknown_type",
            f"type must be one of: {valid}",
            {"problems": problems, "valid_types": [t.value for t in MemoryType]},
        )
    first = problems[0] if problems else {"field": "body", "problem": "invalid"}
    return error_response(
        422,
        "invalid_request",
        f"{first['field']}: {first['problem']}",
        {"problems": problems},
        provider,
    )


async def _http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, StarletteHTTPException)
    # FastAPI answers 400 only when it cannot parse the body (invalid UTF-8, too deep JSON).
    code = {400: "malformed_json", 404: "not_found", 405: "method_not_allowed"}.get(
        error.status_code, "http_error"
    )
    return error_response(error.status_code, code, str(error.detail), None, _provider(request))


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(errors.DomainError, _domain_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)


class BodySizeLimit:
    """Answers 413 before the route runs when the body is larger than the path's limit
    (`max_bytes`, or the first of `by_prefix` whose prefix the path has), whether or not the
    client sent a Content-Length."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, by_prefix: tuple[tuple[str, int], ...] = ()
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.by_prefix = by_prefix

    def _limit(self, path: str) -> int:
        return next((n for prefix, n in self.by_prefix if path.startswith(prefix)), self.max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self._limit(scope.get("path", ""))
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._reject(scope, receive, send, limit)
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            body.extend(message.get("body", b""))
            more = message.get("more_body", False)
            if len(body) > limit:
                await self._reject(scope, receive, send, limit)
                return
        await self.app(scope, _replay(bytes(body), receive), send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        response = error_response(
            413,
            "body_too_large",
            f"the request body is larger than {limit} bytes",
            {"max_bytes": limit},
            provider_of(scope.get("path", ""), Headers(scope=scope)),
        )
        await response(scope, receive, send)


def _replay(body: bytes, downstream: Receive) -> Receive:
    """Hands the buffered body to the app once, then passes on whatever the client sends."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await downstream()

    return receive
