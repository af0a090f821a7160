"""One entry point for the `memory` tool, shared by HTTP (`POST /sessions/{id}/memory`) and
MCP: checks the caller's scope for the type, runs it, and answers the result twice, as data
and as the text to put in the model's tool message."""

from __future__ import annotations

from typing import Any

from app.core import memory_tool as tool
from app.core.errors import InvalidForget
from app.core.memory_tool import MemoryType
from app.services import memory
from app.services.auth import Principal
from app.services.context import ServiceContext
from app.services.recall import recall_query
from app.services.sessions import session_status


def definitions(caller: Principal) -> dict[str, Any]:
    types = tool.enabled_types(caller.scopes)
    return {
        "types": [t.value for t in types],
        "openai": tool.openai_tool(types),
        "anthropic": tool.anthropic_tool(types),
    }


async def call_memory(
    ctx: ServiceContext, caller: Principal, session_id: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    """`arguments` are validated already (one of the typed call models)."""
    kind = MemoryType(arguments["type"])
    caller.require(tool.SCOPE_OF[kind])
    result, text = await _run(ctx, caller, session_id, kind, arguments)
    return {"type": kind.value, "text": text, "result": result}


async def _run(
    ctx: ServiceContext,
    caller: Principal,
    session_id: str,
    kind: MemoryType,
    arguments: dict[str, Any],
) -> tuple[dict[str, Any], str]:
    tenant = caller.tenant_id
    if kind is MemoryType.HELP:
        body = tool.help_body(tool.enabled_types(caller.scopes))
        return body, tool.help_text(body)
    if kind is MemoryType.RECALL:
        result = await recall_query(
            ctx, tenant, session_id, arguments["query"], arguments.get("top_k"), skip_injected=True
        )
        return result, tool.recall_text(result)
    if kind is MemoryType.STATUS:
        status = await session_status(ctx, tenant, session_id)
        return status, tool.status_text(status)
    if kind is MemoryType.REMEMBER:
        result = await memory.remember(
            ctx, tenant, session_id, arguments["text"], list(arguments.get("tags") or [])
        )
        return result, tool.remember_text(result)
    if kind is MemoryType.OFFLOAD:
        result = await memory.schedule_offload(
            ctx, tenant, session_id, arguments.get("until_tokens")
        )
        return result, tool.offload_text(result)
    if arguments.get("confirm"):
        if any(arguments.get(name) is not None for name in ("chunk_id", "turn_start", "turn_end")):
            raise InvalidForget("confirm takes the pending id alone")
        result = await memory.confirm_forget(ctx, caller, session_id, arguments["confirm"])
    else:
        result = await memory.request_forget(
            ctx,
            caller,
            session_id,
            chunk_id=arguments.get("chunk_id"),
            turn_start=arguments.get("turn_start"),
            turn_end=arguments.get("turn_end"),
        )
    return result, tool.forget_text(result)
