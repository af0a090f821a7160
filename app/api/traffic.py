"""Counts the HTTP requests in progress for the throttle, so that a large call steps aside
for them (app/services/throttle.py, `Traffic`)."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from app.services.throttle import Traffic


def _traffic_of(scope: Scope) -> Traffic | None:
    """The serving app's traffic; None before its lifespan has built the context."""
    context = getattr(scope["app"].state, "context", None)
    return None if context is None else context.throttle.traffic


class CountTraffic:
    """Every HTTP request is traffic from its first byte read to its last byte sent."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        traffic = _traffic_of(scope) if scope["type"] == "http" else None
        if traffic is None:
            await self.app(scope, receive, send)
            return
        traffic.enter()
        try:
            await self.app(scope, receive, send)
        finally:
            traffic.leave()
