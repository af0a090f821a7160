"""Security headers for the pages a browser renders (the inspector under /ui, the API docs):
each page family names its policy and the paths it covers; one middleware adds it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from fastapi import FastAPI, Request, Response

# The docs pages run their own inline start-up script and styles; nothing else leaves the
# server, so a page works offline and never calls another host (ReDoc's footer logo would).
DOCS_PAGES = frozenset({"/docs", "/redoc"})
DOCS_PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self' 'unsafe-inline'; "
        "style-src 'self' 'unsafe-inline'; img-src 'self' data:; worker-src 'self' blob:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


def guard_pages(app: FastAPI, headers: Mapping[str, str], covers: Callable[[str], bool]) -> None:
    """Adds `headers` to every answer whose path `covers` names."""

    async def guard(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        if covers(request.url.path):
            response.headers.update(headers)
        return response

    app.middleware("http")(guard)


def guard_docs_pages(app: FastAPI) -> None:
    guard_pages(app, DOCS_PAGE_HEADERS, DOCS_PAGES.__contains__)
