"""Dependencies: the service context built once at start-up, and the caller's tenant, checked
against the scope each route needs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from app.core.scopes import Scope
from app.services.auth import Principal, authenticate
from app.services.context import ServiceContext

bearer = HTTPBearer(auto_error=False, description="An API key from `ebbtide keys create`.")


def service_context(request: Request) -> ServiceContext:
    context: ServiceContext = request.app.state.context
    return context


async def principal(
    request: Request,
    ctx: Annotated[ServiceContext, Depends(service_context)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    caller = await authenticate(ctx, credentials.credentials if credentials else None)
    request.state.tenant = caller.tenant_id  # for the request's log line
    return caller


# The proxy's callers send their provider's credentials in Authorization (and x-api-key),
# forwarded upstream; their Ebbtide key comes in a header of its own.
ebbtide_key = APIKeyHeader(
    name="X-Ebbtide-Key",
    auto_error=False,
    description="An API key from `ebbtide keys create` (proxy endpoints).",
)


async def proxy_tenant(
    request: Request,
    ctx: Annotated[ServiceContext, Depends(service_context)],
    key: Annotated[str | None, Depends(ebbtide_key)],
) -> str:
    """The proxy caller's tenant, once its key is known to hold the write scope."""
    caller = await authenticate(ctx, key, how="X-Ebbtide-Key: <key>")
    request.state.tenant = caller.tenant_id
    caller.require(Scope.WRITE)
    return caller.tenant_id


def tenant_with(scope: Scope) -> Callable[..., Awaitable[str]]:
    """A dependency answering the caller's tenant once the key is known to hold `scope`."""

    async def tenant(caller: Annotated[Principal, Depends(principal)]) -> str:
        caller.require(scope)
        return caller.tenant_id

    return tenant
