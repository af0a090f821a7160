"""The `memory` tool over MCP (official `mcp` SDK): the same calls, scopes and answers as
`POST /sessions/{id}/memory`, with the session named in the arguments. Served over stdio by
`ebbtide mcp`, and over streamable HTTP at `/mcp` beside the REST API (stateless, JSON
responses, so any replica can answer). Over HTTP the caller's key comes in the
`Authorization: Bearer` header; over stdio from `EBBTIDE_API_KEY`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import Field, TypeAdapter, ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.errors import error_response
from app.api.schemas import SESSION_ID_PATTERN, MemoryCall, MemoryResponse
from app.core import memory_tool
from app.core.errors import DomainError
from app.core.memory_tool import MemoryType
from app.services.auth import Principal, authenticate
from app.services.context import ServiceContext
from app.services.memory_tool import call_memory

INSTRUCTIONS = (
    "Ebbtide keeps a long conversation's earlier turns word for word outside the model's "
    "context. The memory tool searches, adds to and inspects them; call it with type help "
    "when unsure."
)
CALLS: TypeAdapter[MemoryCall] = TypeAdapter(MemoryCall)
MCP_PATH = "/mcp"
BearerSource = Callable[[Context], str | None]


def bearer_from_headers(context: Context) -> str | None:
    """The key of an HTTP caller (`Authorization: Bearer <key>`)."""
    header = (context.headers or {}).get("authorization", "")
    scheme, _, key = header.partition(" ")
    return key.strip() if scheme.lower() == "bearer" and key.strip() else None


def _call(**given: Any) -> MemoryCall:
    """The flat MCP arguments as the typed call (null fields are ignored, as over HTTP)."""
    try:
        return CALLS.validate_python(given)
    except ValidationError as error:  # the SDK has checked `type` against its enum already
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'][1:]) or 'arguments'}: {e['msg']}"
            for e in error.errors()
        )
        raise ToolError(f"invalid_request: {problems}") from error


class PostOnly:
    """Answers anything but POST on the MCP path with 405: served stateless with JSON answers,
    the endpoint never sends on its own, so a GET's event stream would only hold a connection
    open, unauthenticated, for as long as the client likes."""

    def __init__(self, app: ASGIApp, path: str = MCP_PATH) -> None:
        self.app = app
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == self.path and scope["method"] != "POST":
            response = error_response(
                405, "method_not_allowed", f"{self.path} takes POST only (stateless, JSON answers)"
            )
            response.headers["Allow"] = "POST"
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def build_mcp(context_of: Callable[[], ServiceContext], bearer_of: BearerSource) -> MCPServer:
    """`context_of` gives the service context once it exists (after the app's start-up)."""
    server = MCPServer(name="ebbtide", instructions=INSTRUCTIONS)
    every_type = list(MemoryType)

    @server.tool(name=memory_tool.TOOL_NAME, description=memory_tool.description(every_type))
    async def memory(
        session_id: Annotated[
            str, Field(pattern=SESSION_ID_PATTERN, description="The conversation's session id.")
        ],
        type: Literal["help", "recall", "remember", "carry", "status", "offload", "forget"],
        ctx: Context,
        query: str | None = None,
        top_k: int | None = None,
        text: str | None = None,
        tags: list[str] | None = None,
        until_tokens: int | None = None,
        chunk_id: str | None = None,
        turn_start: int | None = None,
        turn_end: int | None = None,
        confirm: str | None = None,
        from_session: str | None = None,
        fact_ids: list[int] | None = None,
    ) -> CallToolResult:
        call = _call(
            type=type,
            query=query,
            top_k=top_k,
            text=text,
            tags=tags,
            until_tokens=until_tokens,
            chunk_id=chunk_id,
            turn_start=turn_start,
            turn_end=turn_end,
            confirm=confirm,
            from_session=from_session,
            fact_ids=fact_ids,
        )
        service = context_of()
        try:
            caller: Principal = await authenticate(service, bearer_of(ctx))
            answer = MemoryResponse.of(await call_memory(service, caller, session_id, call))
        except DomainError as error:
            raise ToolError(f"{error.code}: {error.message}") from error
        return CallToolResult(
            content=[TextContent(type="text", text=answer.text)],
            structured_content=answer.model_dump(mode="json"),
        )

    return server
