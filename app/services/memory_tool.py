"""One entry point for the `memory` tool, shared by HTTP (`POST /sessions/{id}/memory`) and
MCP: checks the caller's scope for the call's type, runs it, and answers the result twice,
as data and as the text to put in the model's tool message."""

from __future__ import annotations

from dataclasses import dataclass

from app.core import memory_tool as tool
from app.core.errors import InvalidForget
from app.core.facts import CarryFacts
from app.core.memory_tool import (
    MemoryAnswer,
    MemoryCall,
    MemoryCarry,
    MemoryForget,
    MemoryHelp,
    MemoryOffload,
    MemoryRecall,
    MemoryRemember,
    MemoryResult,
    MemoryStatus,
    MemoryType,
)
from app.core.types import JsonObject
from app.services import memory
from app.services.auth import Principal
from app.services.carry import carry_into
from app.services.context import ServiceContext
from app.services.recall import recall_query
from app.services.sessions import owned_session, session_status


@dataclass(frozen=True)
class ToolDefinitions:
    """The tool as each provider's function-calling API takes it (JSON schema objects)."""

    types: tuple[MemoryType, ...]
    openai: JsonObject
    anthropic: JsonObject


def definitions(caller: Principal) -> ToolDefinitions:
    types = tool.enabled_types(caller.scopes)
    return ToolDefinitions(tuple(types), tool.openai_tool(types), tool.anthropic_tool(types))


async def call_memory(
    ctx: ServiceContext, caller: Principal, session_id: str, call: MemoryCall
) -> MemoryResult:
    kind = MemoryType(call.type)
    caller.require(tool.SCOPE_OF[kind])
    answer = await _run(ctx, caller, session_id, call)
    return MemoryResult(type=kind, text=tool.answer_text(answer), result=answer)


async def _run(
    ctx: ServiceContext, caller: Principal, session_id: str, call: MemoryCall
) -> MemoryAnswer:
    tenant = caller.tenant_id
    match call:
        case MemoryHelp():
            await _check_owner(ctx, tenant, session_id)
            return tool.help_body(tool.enabled_types(caller.scopes))
        case MemoryRecall(query=query, top_k=top_k):
            return await recall_query(ctx, tenant, session_id, query, top_k, skip_injected=True)
        case MemoryStatus():
            return await session_status(ctx, tenant, session_id)
        case MemoryRemember(text=text, tags=tags):
            return await memory.remember(ctx, tenant, session_id, text, tags)
        case MemoryCarry(from_session=from_session, fact_ids=fact_ids):
            carry = CarryFacts(from_session, tuple(dict.fromkeys(fact_ids)))
            return await carry_into(ctx, tenant, session_id, carry)
        case MemoryOffload(until_tokens=until_tokens):
            return await memory.schedule_offload(ctx, tenant, session_id, until_tokens)
        case MemoryForget():
            return await _forget(ctx, caller, session_id, call)


async def _check_owner(ctx: ServiceContext, tenant_id: str, session_id: str) -> None:
    async with ctx.database.transaction() as db:
        await owned_session(db, tenant_id, session_id)


async def _forget(
    ctx: ServiceContext, caller: Principal, session_id: str, call: MemoryForget
) -> MemoryAnswer:
    if call.confirm:
        if any(v is not None for v in (call.chunk_id, call.turn_start, call.turn_end)):
            raise InvalidForget("confirm takes the pending id alone")
        return await memory.confirm_forget(ctx, caller, session_id, call.confirm)
    return await memory.request_forget(
        ctx,
        caller,
        session_id,
        chunk_id=call.chunk_id,
        turn_start=call.turn_start,
        turn_end=call.turn_end,
    )
