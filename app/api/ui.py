"""The session inspector (docs/OBSERVABILITY.md): server-rendered pages under /ui, a little
script and no build step.

Keys: the same keys and tenant rules as the API. A person logs in once with a key through the
form at /ui/login and gets a login: a random token (never the key; stored hashed, tied to the
key) in a cookie that is HttpOnly (no script reads it), SameSite=Strict (no other site's page
sends it), Secure over HTTPS, scoped to /ui and gone when the browser closes. Every request
checks the login afresh: logging out (a POST with the page's CSRF token), revoking its key or
its expiry (`inspector.login_hours`) ends it at once. In development mode (no key exists) no
login is needed, as for the API. The pages' own calls (search, trace) must carry the
`X-Ebbtide-UI` header, which a form on another site cannot send.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, FastAPI, Form, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, Field

from app.api.deps import service_context
from app.api.pages import guard_pages
from app.api.schemas import CHUNK_ID_PATTERN, SESSION_ID_PATTERN
from app.api.ui_chart import budget_chart
from app.core.errors import Forbidden, SessionNotFound, Unauthenticated
from app.core.memory_tool import recall_text
from app.core.recall_trace import CandidateOutcome
from app.core.scopes import Scope
from app.services.auth import (
    Principal,
    authenticate,
    end_inspector_login,
    inspector_caller,
    keys_exist,
    open_inspector_login,
)
from app.services.context import ServiceContext
from app.services.inspector import inspect_session, list_sessions, trace_detail
from app.services.recall import recall_query
from app.services.sessions import read_chunk

UI_PREFIX = "/ui"
LOGIN_COOKIE = "ebbtide_ui_login"
UI_HEADER = "X-Ebbtide-UI"
MAX_KEY_CHARS = 256

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
templates.env.filters["thousands"] = lambda value: f"{value:,}"
templates.env.filters["score"] = lambda value: "–" if value is None else f"{value:.3f}"

# Why a candidate was or was not injected, in words (the four failure classes: a candidate
# is "found"; these say whether it reached the prompt and, if not, what stopped it).
OUTCOME_WORDS = {
    CandidateOutcome.INJECTED: "in the prompt: injected this turn",
    CandidateOutcome.POINTED: "pointed to: a one-line pointer this turn, not its text",
    CandidateOutcome.REPEATED: "left out: the prompt already holds what it says",
    CandidateOutcome.HELD: "in the prompt: a block held from an earlier turn quotes it",
    CandidateOutcome.IN_WINDOW: "in the prompt: its turns are still in the window",
    CandidateOutcome.NOT_EVIDENCE: "found, not in the top k: below the confidence floors",
    CandidateOutcome.OFF_THE_DAY: "found, not in the top k: not said on the day asked about",
    CandidateOutcome.BEYOND_TOP_K: "found, not in the top k: k better items came first",
    CandidateOutcome.NO_ROOM: "found, not in the top k: no room left in the recall budget",
}

router = APIRouter(prefix=UI_PREFIX, include_in_schema=False)
Context = Annotated[ServiceContext, Depends(service_context)]
SessionId = Annotated[str, PathParam(pattern=SESSION_ID_PATTERN)]


class LoginRequired(Exception):
    """A page was asked for without a usable key: the answer is the login form."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason)
        self.path = path


async def _caller(request: Request, ctx: ServiceContext) -> Principal:
    login = await inspector_caller(ctx, request.cookies.get(LOGIN_COOKIE))
    login.principal.require(Scope.READ)
    request.state.tenant = login.principal.tenant_id  # for the request's log line
    request.state.csrf = login.csrf  # for the page's logout form
    return login.principal


async def page_caller(request: Request, ctx: Context) -> Principal:
    """The caller of a page; without a usable key, the login form instead."""
    try:
        return await _caller(request, ctx)
    except (Unauthenticated, Forbidden) as error:
        raise LoginRequired(request.url.path, error.message) from error


async def call_caller(request: Request, ctx: Context) -> Principal:
    """The caller of a page's own call (a 401/403 body, never a redirect), which must carry
    the UI header."""
    if request.headers.get(UI_HEADER) != "1":
        raise Forbidden(f"the inspector's calls carry the {UI_HEADER} header", header=UI_HEADER)
    return await _caller(request, ctx)


PageCaller = Annotated[Principal, Depends(page_caller)]
CallCaller = Annotated[Principal, Depends(call_caller)]


def _login_redirect(_: Request, error: Exception) -> Response:
    assert isinstance(error, LoginRequired)
    target = f"{UI_PREFIX}/login?next={quote(error.path)}"
    response = RedirectResponse(target, status_code=303)
    response.delete_cookie(LOGIN_COOKIE, path=UI_PREFIX)
    return response


def _safe_next(target: str | None) -> str:
    """Only a path of the inspector: never another site (an open redirect)."""
    if target and target.startswith(f"{UI_PREFIX}/"):
        return target
    return f"{UI_PREFIX}/"


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request, ctx: Context, next: str | None = None) -> Response:
    if not await keys_exist(ctx):  # development mode: nothing to log in with
        return RedirectResponse(_safe_next(next), status_code=303)
    return templates.TemplateResponse(
        request, "login.html", {"next": _safe_next(next), "error": None}
    )


@router.post("/login", response_class=HTMLResponse)
async def login(
    request: Request,
    ctx: Context,
    key: Annotated[str, Form(max_length=MAX_KEY_CHARS)],
    next: Annotated[str | None, Form(max_length=2048)] = None,
) -> Response:
    """Checks the key as the API would, then opens a login whose token goes in the cookie."""
    if not await keys_exist(ctx):  # development mode: every caller is let in, keyless
        return RedirectResponse(_safe_next(next), status_code=303)
    try:
        caller = await authenticate(ctx, key.strip() or None, how="an API key")
        caller.require(Scope.READ)
    except (Unauthenticated, Forbidden) as error:
        context = {"next": _safe_next(next), "error": error.message}
        return templates.TemplateResponse(request, "login.html", context, status_code=401)
    token, _ = await open_inspector_login(ctx, key.strip())
    response = RedirectResponse(_safe_next(next), status_code=303)
    response.set_cookie(
        LOGIN_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path=UI_PREFIX,
    )
    return response


@router.post("/logout")
async def logout(
    request: Request, ctx: Context, csrf: Annotated[str, Form(max_length=256)] = ""
) -> Response:
    """Ends the login, when the form sent its CSRF token; then the login form."""
    await end_inspector_login(ctx, request.cookies.get(LOGIN_COOKIE), csrf)
    response = RedirectResponse(f"{UI_PREFIX}/login", status_code=303)
    response.delete_cookie(LOGIN_COOKIE, path=UI_PREFIX)
    return response


def _page_context(request: Request, caller: Principal) -> dict[str, object]:
    return {
        "tenant": caller.tenant_id,
        "logged_in": LOGIN_COOKIE in request.cookies,
        "csrf": getattr(request.state, "csrf", ""),
        "docs_url": request.app.docs_url,
    }


@router.get("/", response_class=HTMLResponse)
async def sessions_page(
    request: Request,
    ctx: Context,
    caller: PageCaller,
    page: Annotated[int, Query(ge=0, le=100_000)] = 0,
) -> Response:
    """The caller's sessions, the most recently used first."""
    sessions = await list_sessions(ctx, caller.tenant_id, page)
    size = ctx.settings.inspector.sessions_per_page
    context = {**_page_context(request, caller), "sessions": sessions, "page": page}
    context["more"] = len(sessions) == size
    return templates.TemplateResponse(request, "sessions.html", context)


@router.get("/sessions/{session_id}", response_class=HTMLResponse)
async def session_page(
    request: Request,
    ctx: Context,
    caller: PageCaller,
    session_id: SessionId,
    turn: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None,
    archive: Annotated[int, Query(ge=0, le=100_000)] = 0,
) -> Response:
    """One session: budget timeline, notes, facts, archive, a turn's recall decisions."""
    try:
        found = await inspect_session(
            ctx, caller.tenant_id, session_id, turn=turn, archive_page=archive
        )
    except SessionNotFound:
        context = {**_page_context(request, caller), "session_id": session_id}
        return templates.TemplateResponse(request, "not_found.html", context, status_code=404)
    context = {
        **_page_context(request, caller),
        "s": found,
        "chart": budget_chart(found.timeline),
        "outcome_words": OUTCOME_WORDS,
    }
    return templates.TemplateResponse(request, "session.html", context)


@router.get("/sessions/{session_id}/chunks/{chunk_id}", response_class=PlainTextResponse)
async def chunk_text(
    ctx: Context,
    caller: CallCaller,
    session_id: SessionId,
    chunk_id: Annotated[str, PathParam(max_length=40, pattern=CHUNK_ID_PATTERN)],
) -> Response:
    """A chunk's raw text, for the archive's rows (shown as text, never as markup)."""
    chunk = await read_chunk(ctx, caller.tenant_id, session_id, chunk_id)
    return PlainTextResponse(chunk.raw_text)


class SearchRequest(BaseModel):
    query: str = Field(min_length=1, max_length=2000)


class SearchAnswer(BaseModel):
    text: str  # what the memory tool would put in the model's tool message
    chunk_ids: list[str]
    fallback: str | None
    pending_chunks: int


@router.post("/sessions/{session_id}/recall", response_model=SearchAnswer)
async def search(
    ctx: Context, caller: CallCaller, session_id: SessionId, body: SearchRequest
) -> SearchAnswer:
    """`POST /sessions/{id}/recall`'s use case, answered as the model would read it."""
    found = await recall_query(ctx, caller.tenant_id, session_id, body.query, None)
    return SearchAnswer(
        text=recall_text(found),
        chunk_ids=[r.chunk_id for r in found.results],
        fallback=found.fallback,
        pending_chunks=found.pending_chunks,
    )


class TraceRequest(BaseModel):
    text: str = Field(min_length=1, max_length=2000)
    turn: int | None = Field(None, ge=0, le=2**31 - 1)


class TracePlace(BaseModel):
    where: str
    ref: str
    verdict: str
    reason: str


class TraceAnswer(BaseModel):
    turn: int
    verdict: str
    places: list[TracePlace]
    chunks_searched: int
    searched_all: bool


@router.post("/sessions/{session_id}/trace", response_model=TraceAnswer)
async def trace(
    ctx: Context, caller: CallCaller, session_id: SessionId, body: TraceRequest
) -> TraceAnswer:
    """Where a detail was at a turn: not stored, not found, found but not in the top k, or
    in the prompt."""
    found = await trace_detail(ctx, caller.tenant_id, session_id, body.text, body.turn)
    return TraceAnswer(
        turn=found.turn,
        verdict=found.verdict.value,
        places=[
            TracePlace(where=p.where, ref=p.ref, verdict=p.verdict.value, reason=p.reason)
            for p in found.places
        ],
        chunks_searched=found.chunks_searched,
        searched_all=found.searched_all,
    )


# Every /ui answer: its own scripts, styles and calls only (no inline script can run), never
# inside another site's frame, and no page address sent to other sites.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


def _is_page(path: str) -> bool:
    return path == UI_PREFIX or path.startswith(f"{UI_PREFIX}/")


def install_inspector(app: FastAPI) -> None:
    """Mounts the pages, their static files, the login redirect and the pages' headers."""
    guard_pages(app, PAGE_HEADERS, _is_page)
    app.include_router(router)
    app.mount(f"{UI_PREFIX}/static", StaticFiles(directory=HERE / "static"), name="ui-static")
    app.add_exception_handler(LoginRequired, _login_redirect)
