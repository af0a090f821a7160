"""One log line and two metrics per HTTP request, labelled by route template (never by the
session id in the path), with a request id the client may send and always gets back."""

from __future__ import annotations

import logging
import re
import time
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import metrics

log = logging.getLogger("ebbtide.request")

REQUEST_ID_HEADER = b"x-request-id"
VALID_REQUEST_ID = re.compile(rb"^[A-Za-z0-9._\-]{1,64}$")
UNMATCHED = "unmatched"
DEBUG_BODY_CHARS = 4000


def request_id_of(scope: Scope) -> str:
    given: bytes | None = dict(scope.get("headers") or []).get(REQUEST_ID_HEADER)
    if given is not None and VALID_REQUEST_ID.match(given):
        return given.decode()
    return uuid.uuid4().hex


class RequestObserver:
    """Outermost middleware. `log_bodies` (debug only) adds the request body to the line."""

    def __init__(self, app: ASGIApp, *, log_bodies: bool = False) -> None:
        self.app = app
        self.log_bodies = log_bodies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)
        started = time.perf_counter()
        status = 500  # unless a response starts
        body = bytearray()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [*message.get("headers", []), (REQUEST_ID_HEADER, request_id.encode())]
                message = {**message, "headers": headers}
            await send(message)

        async def receive_and_keep() -> Message:
            message = await receive()
            if len(body) < DEBUG_BODY_CHARS:
                body.extend(message.get("body", b""))
            return message

        try:
            await self.app(scope, receive_and_keep if self.log_bodies else receive, send_with_id)
        finally:
            self._record(scope, request_id, status, time.perf_counter() - started, bytes(body))

    def _record(
        self, scope: Scope, request_id: str, status: int, seconds: float, body: bytes
    ) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) or UNMATCHED
        method = scope["method"]
        metrics.HTTP_REQUESTS.labels(method=method, route=template, status=str(status)).inc()
        metrics.HTTP_SECONDS.labels(method=method, route=template).observe(seconds)
        fields = {
            "request_id": request_id,
            "method": method,
            "route": template,
            "status": status,
            "ms": round(seconds * 1000, 1),
            "tenant": (scope.get("state") or {}).get("tenant"),
        }
        if self.log_bodies:
            fields["body"] = body[:DEBUG_BODY_CHARS].decode(errors="replace")
        log.info("request", extra={"fields": fields})
