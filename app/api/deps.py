"""Dependencies: the service context built once at start-up, and the caller's tenant."""

from __future__ import annotations

from fastapi import Request

from app.services.context import ServiceContext
from app.store.models import DEFAULT_TENANT


def service_context(request: Request) -> ServiceContext:
    context: ServiceContext = request.app.state.context
    return context


def current_tenant() -> str:
    """Single-tenant development mode until API keys arrive (tenancy issue)."""
    return DEFAULT_TENANT
