"""`POST /bench/floor/{session_id}`: the benchmark's reference endpoint (app/services/floor.py).
Same framework, auth and database round trip as a turn; outside the public contract."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from app.api.deps import service_context, tenant_with
from app.api.routes import SessionId
from app.api.schemas import TurnRequest
from app.services.context import ServiceContext
from app.services.floor import store_and_echo

router = APIRouter(include_in_schema=False)


@router.post("/bench/floor/{session_id}")
async def post_floor(
    session_id: SessionId,
    body: TurnRequest,
    ctx: Annotated[ServiceContext, Depends(service_context)],
    tenant: Annotated[str, Depends(tenant_with("memory:write"))],
) -> dict[str, Any]:
    return await store_and_echo(ctx, tenant, session_id, body.messages)
