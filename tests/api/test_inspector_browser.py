"""The session inspector in a real browser: Debian's headless Chromium, driven by Playwright,
against a live `ebbtide serve` with keys on loopback, after a scripted conversation.

The browser is found at EBBTIDE_CHROMIUM, else `chromium` on the PATH (`.ci/run` and
`make test` install Debian's package when it is missing). Set EBBTIDE_SCREENSHOT_DIR to keep
the page's screenshot (docs/inspector.png is made so)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

from app.main import build_context
from app.services.auth import create_key
from tests.api.live import LiveServer
from tests.conftest import make_settings

SESSION = "inspector-demo"
FACT = "The cloud server budget is capped at 12,400 dollars per quarter."
POLICY = {"floor_turns": 2, "floor_tokens": 0}
WINDOW = {"model": "gpt-4o", "context_window": 3000, "policy": POLICY}
QUESTION = "What was the budget we agreed on for cloud servers?"
# Turns of a planning conversation that push the fact out of a 3,000-token window.
TALK = [
    f"{topic} The figures for the last three quarters sit side by side in the shared sheet, "
    f"with the assumptions behind each estimate written out in full. {detail} The finance "
    "team reads the one-page summary first, and the people reviewing the plan were not in "
    "these meetings, so the summary explains how each decision was reached and what it "
    "depends on. Where two options came out close, the sheet lists both with their costs, "
    "their risks and the date by which a choice is due, so that nobody has to reconstruct "
    "the reasoning from old messages when the quarter closes."
    for topic, detail in (
        ("The warehouse move for the spring catalogue is next.", "Rent rises in April."),
        ("The carrier contracts come after that.", "Three offers cover the eastern routes."),
        ("The staffing plan covers the peak season.", "Temporary workers start in May."),
        ("The returns process is slow.", "Refunds take eleven days on average."),
        ("The packaging review aims at less plastic.", "Fragile goods keep their foam."),
        ("The customs paperwork for Korea gets a checklist.", "Two forms changed this year."),
        ("The supplier scorecard is half done.", "Purchasing wants it by the end of June."),
        ("The inventory audit is next month.", "It has to avoid the summer sale."),
        ("The dashboard shows five numbers.", "The operations lead reads it at nine."),
        ("The training plan for new pickers is drafted.", "Each session lasts two hours."),
        ("The insurance renewal is due in July.", "The broker sent two quotes."),
        ("The website's delivery estimates are off.", "They assume a two-day transit."),
    )
]
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-dev-shm-usage",
    # No network but loopback here: keep Chromium from calling home.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
TIMEOUT_MS = 20_000


def chromium_path() -> str:
    found = os.environ.get("EBBTIDE_CHROMIUM") or shutil.which("chromium")
    if not found:
        pytest.fail("no Chromium: install Debian's chromium package (make test does, as root)")
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def conversation(keys_and_server: tuple[LiveServer, dict[str, str]]) -> list[Any]:
    """A planted fact, filler until it is offloaded, a question about it: the answers."""
    live, keys = keys_and_server
    headers = {"Authorization": f"Bearer {keys['full']}"}
    texts = [FACT, "Ship only from the Suzhou warehouse, never from Guangzhou.", *TALK, QUESTION]
    answers = []
    with httpx.Client(base_url=live.base, headers=headers, timeout=30) as http:
        for text in texts:
            body = {"messages": [{"role": "user", "content": text}], **WINDOW}
            response = http.post(f"/sessions/{SESSION}/turn", json=body)
            assert response.status_code == 200, response.text
            answers.append(response.json())
    return answers


def event_log(live: LiveServer, key: str) -> list[dict[str, Any]]:
    response = httpx.get(
        f"{live.base}/sessions/{SESSION}/events",
        params={"kind": "turn", "limit": 500},
        headers={"Authorization": f"Bearer {key}"},
    )
    response.raise_for_status()
    return list(response.json()["events"])


class Console:
    """Every error the page logs or throws."""

    def __init__(self, page: Page) -> None:
        self.errors: list[str] = []
        page.on("console", self._message)
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))

    def _message(self, message: ConsoleMessage) -> None:
        if message.type in {"error", "warning"}:
            self.errors.append(f"{message.type}: {message.text}")


def log_in(page: Page, base: str, key: str, path: str) -> None:
    page.goto(f"{base}{path}")
    assert page.url.startswith(f"{base}/ui/login"), page.url
    page.fill("input[name=key]", key)
    page.click("button[type=submit]")
    page.wait_for_load_state()


def test_the_session_page_draws_the_turns_offloads_and_answers_a_search(
    browser: Browser,
    keys_and_server: tuple[LiveServer, dict[str, str]],
    conversation: list[Any],
    tmp_path: Path,
) -> None:
    live, keys = keys_and_server
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    console = Console(page)
    log_in(page, live.base, keys["default"], f"/ui/sessions/{SESSION}")
    assert page.url == f"{live.base}/ui/sessions/{SESSION}"

    events = event_log(live, keys["default"])
    assert len(events) == len(conversation)
    assert page.locator("circle.turn-point").count() == len(events)
    offloads = [e["turn"] for e in events if e["payload"]["offload"]["triggered"]]
    assert offloads, "the conversation must offload"
    markers = page.locator("g.offload-marker")
    assert [int(m.get_attribute("data-turn") or 0) for m in markers.all()] == offloads
    offload_events = [e for e in events if e["turn"] in offloads]
    for marker, event in zip(markers.all(), offload_events, strict=True):
        freed = event["payload"]["offload"]["tokens_freed"]
        assert int(marker.get_attribute("data-tokens-freed") or 0) == freed

    # The question's turn: the fact's chunk is a candidate whose words are in the prompt:
    # injected this turn, held in a block an earlier turn injected, or already there (the
    # notes' key facts carry the amount; which of the three depends on when the embedding
    # worker caught up). The trace below checks the fact is in the prompt.
    fact_chunk = events[offloads[0] - 1]["payload"]["offload"]["chunk_ids"][0]
    row = page.locator(f"#candidates tr[data-chunk='{fact_chunk}']")
    assert row.get_attribute("data-outcome") in {"injected", "held", "repeated"}

    page.fill("#search-form input[name=query]", "the cloud server budget per quarter")
    page.click("#search-form button")
    result = page.locator("#search-result")
    result.filter(has_text="12,400").wait_for()
    assert FACT in result.inner_text()

    page.fill("#trace-form input[name=text]", "12,400 dollars")
    page.click("#trace-form button")
    verdict = page.locator("#trace-result .verdict")
    verdict.wait_for()
    assert verdict.get_attribute("data-verdict") == "in_prompt"

    first_chunk = page.locator("details.chunk-text").last  # the oldest: the planted fact
    first_chunk.locator("summary").click()
    first_chunk.locator("pre").filter(has_text="12,400").wait_for()

    shots = Path(os.environ.get("EBBTIDE_SCREENSHOT_DIR") or tmp_path)
    page.screenshot(path=str(shots / "inspector.png"), full_page=True)
    assert console.errors == []
    context.close()


def test_another_tenants_key_gets_no_data(
    browser: Browser,
    keys_and_server: tuple[LiveServer, dict[str, str]],
    conversation: list[Any],
) -> None:
    live, _ = keys_and_server
    # Playwright's sync API runs a loop in this thread: the key is made in another.
    with ThreadPoolExecutor(1) as pool:
        other = pool.submit(asyncio.run, _other_tenants_key(live.database_url)).result()
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    console = Console(page)
    log_in(page, live.base, other, f"/ui/sessions/{SESSION}")
    assert page.locator("h1").inner_text() == "No such session"
    assert "12,400" not in page.content() and page.locator("#budget-chart").count() == 0
    page.goto(f"{live.base}/ui/")
    assert page.locator("#no-sessions").is_visible()
    assert SESSION not in page.content()
    # The 404 is the page's answer, logged by Chromium as a failed load; nothing else.
    assert all("404" in error for error in console.errors), console.errors
    context.close()


async def _other_tenants_key(url: str) -> str:
    ctx = build_context(make_settings(embedder={"kind": "hash"}), url)
    try:
        return await create_key(ctx, "initech", ["memory:read"])
    finally:
        await ctx.aclose()
