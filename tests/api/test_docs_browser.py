"""The interactive API docs in a real Chromium with every request off loopback refused, as on
a machine with no internet: Swagger UI and ReDoc render from the assets the server ships."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, Route, sync_playwright

from tests.api.live import fresh_named_database, serving
from tests.api.test_inspector_browser import CHROMIUM_FLAGS, TIMEOUT_MS, chromium_path


@pytest.fixture(scope="module")
def docs_server(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("docs") / "serve.log"
    env = {"EBBTIDE_EMBEDDER__KIND": "hash"}
    with (
        fresh_named_database(database_url, "ebbtide_docs") as url,
        serving({**env, "DATABASE_URL": url}, log) as base,
    ):
        yield base  # development mode (no keys): the docs are served


@pytest.fixture
def offline_page() -> Iterator[tuple[Page, list[str]]]:
    """A page whose requests to any host but 127.0.0.1 are refused, and the refused URLs."""
    refused: list[str] = []

    def only_loopback(route: Route) -> None:
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS)
        page = browser.new_page()
        page.route("**/*", only_loopback)
        yield page, refused
        browser.close()


def test_swagger_ui_renders_every_route_offline(
    docs_server: str, offline_page: tuple[Page, list[str]]
) -> None:
    page, refused = offline_page
    page.goto(f"{docs_server}/docs", timeout=TIMEOUT_MS)
    page.wait_for_selector(".opblock", timeout=TIMEOUT_MS)  # one block per operation
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert any("/sessions/{session_id}/turn" in p for p in paths)
    assert any("/v1/responses" in p for p in paths)
    assert refused == []
    headers = page.request.get(f"{docs_server}/docs").headers
    assert "frame-ancestors 'none'" in headers["content-security-policy"]


def test_redoc_renders_offline(docs_server: str, offline_page: tuple[Page, list[str]]) -> None:
    page, refused = offline_page
    page.goto(f"{docs_server}/redoc", timeout=TIMEOUT_MS)
    page.wait_for_selector("h1", timeout=TIMEOUT_MS)  # the API's title, rendered by ReDoc
    assert "Ebbtide" in page.locator("h1").first.inner_text()
    # not even its footer's logo: the page's policy keeps it from asking another host
    assert refused == []
