"""The session inspector's pages and calls in-process: the login cookie, the tenant rules,
what each page holds, and the trace of a detail through the four failure classes. The same
pages in a real browser: tests/api/test_inspector_browser.py."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from app.api.ui import LOGIN_COOKIE, UI_HEADER
from app.core.recall_trace import CandidateOutcome
from app.services.auth import create_key, revoke_key
from app.services.context import ServiceContext
from app.store.models import EventRow, SessionRow
from tests.builders import turn_body, user, words

WINDOW = {
    "model": "gpt-4o",
    "context_window": 3000,
    "policy": {"floor_turns": 2, "floor_tokens": 0},
}
# The notes keep the capped budget; the rest of what was said is the archive's alone, so recall
# still has something to bring back (what the notes already say is not injected twice).
FACT = (
    "The cloud server budget is capped at 12,400 dollars per quarter. Billing goes through "
    "our Hetzner account at Frankfurt, renewed each March by Marta from finance."
)
UI = {UI_HEADER: "1"}


QUESTION = "Which account did we agree on for the cloud server billing earlier?"


async def say(client: httpx.AsyncClient, session: str, text: str, **fields: Any) -> Any:
    body = turn_body(user(text), **WINDOW, **fields)
    response = await client.post(f"/sessions/{session}/turn", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def converse(client: httpx.AsyncClient, session: str, question: str = QUESTION) -> list[Any]:
    """A fact, filler until it is offloaded, and a question: the turns' answers."""
    texts = [FACT, *(f"filler {t} " + words(120) for t in range(8)), question]
    return [await say(client, session, text) for text in texts]


async def test_a_session_page_shows_each_turn_the_offloads_notes_facts_and_archive(
    client: httpx.AsyncClient,
) -> None:
    answers = await converse(client, "ui-1")
    page = await client.get("/ui/sessions/ui-1")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert len(re.findall(r'<circle class="turn-point', html)) == len(answers)
    offloads = [a["turn"] for a in answers if a["offload"]["triggered"]]
    assert offloads, "the conversation must offload"
    assert [int(t) for t in re.findall(r'class="offload-marker" data-turn="(\d+)"', html)] == (
        offloads
    )
    assert 'class="offload-line"' in html and 'class="emergency-line"' in html
    question = answers[-1]
    injected = [hit["chunk_id"] for hit in question["recall"]["hits"]]
    assert injected and f'id="turn-detail" data-turn="{question["turn"]}"' in html
    for chunk_id in injected:
        assert f'data-chunk="{chunk_id}" data-outcome="injected"' in html
    assert "Which account did we agree on for the cloud server billing ?" in html  # rewritten
    assert "12,400 dollars" in html  # the notes and the facts quote it
    chunk_ids = {c for a in answers for c in a["offload"]["chunk_ids"]}
    assert all(f'<tr class="chunk" data-chunk="{c}">' in html for c in chunk_ids)


async def test_a_turns_event_records_its_candidates_with_scores_and_outcomes(
    client: httpx.AsyncClient,
) -> None:
    answers = await converse(client, "ui-2")
    events = (await client.get("/sessions/ui-2/events", params={"limit": 500})).json()["events"]
    last = events[-1]["payload"]
    assert last["budget"] == answers[-1]["usage"]["budget"] and last["offload_ratio"] == 0.8
    assert last["watermark_base"] == answers[-1]["usage"]["watermark_base"]
    candidates = last["recall"]["candidates"]
    assert candidates, "the question searched the archive"
    assert {c["outcome"] for c in candidates} <= {o.value for o in CandidateOutcome}
    injected = {c["chunk_id"] for c in candidates if c["outcome"] == "injected"}
    assert injected == {hit["chunk_id"] for hit in answers[-1]["recall"]["hits"]}
    best = candidates[0]
    assert set(best) >= {"vector_score", "lexical_score", "fused_score", "margin", "turn_range"}
    assert [c["fused_score"] for c in candidates] == sorted(
        (c["fused_score"] for c in candidates), reverse=True
    )


async def test_any_turn_can_be_detailed_and_an_unknown_one_is_not_found(
    client: httpx.AsyncClient,
) -> None:
    await converse(client, "ui-3")
    first = await client.get("/ui/sessions/ui-3", params={"turn": 1})
    assert 'id="turn-detail" data-turn="1"' in first.text
    assert "archive empty" in first.text  # nothing was archived at turn 1
    missing = await client.get("/ui/sessions/ui-3", params={"turn": 99})
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "turn_not_found"


async def test_the_trace_tells_the_four_failure_classes_apart(client: httpx.AsyncClient) -> None:
    answers = await converse(client, "ui-4")
    question = answers[-1]["turn"]

    async def verdict(text: str, turn: int) -> dict[str, Any]:
        response = await client.post(
            "/ui/sessions/ui-4/trace", json={"text": text, "turn": turn}, headers=UI
        )
        assert response.status_code == 200, response.text
        return dict(response.json())

    recalled = await verdict("12,400 DOLLARS", question)
    assert recalled["verdict"] == "in_prompt"
    assert recalled["places"][0]["reason"] == "recalled this turn"
    said = await verdict("12,400 dollars", 1)
    assert said["verdict"] == "in_prompt" and said["places"][0]["reason"] == "in the window then"
    assert (await verdict("purple elephants", question))["verdict"] == "not_stored"
    before = await verdict("filler 7", 3)  # said at turn 8: not yet stored at turn 3
    assert before["verdict"] == "not_stored"
    assert recalled["chunks_searched"] >= 1 and recalled["searched_all"]


async def test_an_archived_detail_the_turn_did_not_inject_is_found_or_not_found(
    client: httpx.AsyncClient,
) -> None:
    """Small talk searches the archive and finds nothing that is evidence; a turn with recall
    off does not search at all."""
    answers = await converse(client, "ui-4b", "the tulips in the park look lovely this spring")
    assert answers[-1]["recall"]["hits"] == []
    off = await say(client, "ui-4b", "and the roses too", recall="off")

    async def verdict(turn: int) -> dict[str, Any]:
        body = {"text": "12,400 dollars", "turn": turn}
        response = await client.post("/ui/sessions/ui-4b/trace", json=body, headers=UI)
        return dict(response.json())

    passed_by = await verdict(answers[-1]["turn"])
    assert passed_by["verdict"] == "found_not_in_top_k"
    assert passed_by["places"][0]["reason"] == "not_evidence"
    unsearched = await verdict(off["turn"])
    assert unsearched["verdict"] == "not_found"
    assert unsearched["places"][0]["reason"] == "not among the candidates (recall: off)"


async def test_the_trace_refuses_an_overlong_detail_and_a_call_without_the_ui_header(
    client: httpx.AsyncClient,
) -> None:
    await converse(client, "ui-5")
    long = await client.post("/ui/sessions/ui-5/trace", json={"text": "x" * 501}, headers=UI)
    assert long.status_code == 422 and long.json()["error"]["code"] == "over_limit"
    bare = await client.post("/ui/sessions/ui-5/trace", json={"text": "budget"})
    assert bare.status_code == 403 and bare.json()["error"]["details"]["header"] == UI_HEADER
    assert (await client.get("/ui/sessions/ui-5/chunks/ck_nope", headers=UI)).status_code == 404


async def test_the_search_box_answers_as_the_memory_tool_would(client: httpx.AsyncClient) -> None:
    await converse(client, "ui-6")
    found = await client.post(
        "/ui/sessions/ui-6/recall",
        json={"query": "the cloud server budget per quarter"},
        headers=UI,
    )
    assert found.status_code == 200, found.text
    answer = found.json()
    assert FACT in answer["text"] and answer["chunk_ids"]
    # Items best first, headed `#rank (confidence p) [ts | turn a-b | chunk_id]`.
    assert answer["text"].startswith("#1 (confidence ")
    nothing = await client.post(
        "/ui/sessions/ui-6/recall", json={"query": "Zorblax quarterly llama census"}, headers=UI
    )
    assert nothing.json()["text"].startswith("no match")


async def test_a_chunks_raw_text_is_served_as_plain_text(client: httpx.AsyncClient) -> None:
    answers = await converse(client, "ui-7")
    chunk_id = next(c for a in answers for c in a["offload"]["chunk_ids"])
    raw = await client.get(f"/ui/sessions/ui-7/chunks/{chunk_id}", headers=UI)
    assert raw.headers["content-type"].startswith("text/plain") and FACT in raw.text


async def test_hostile_text_is_escaped_on_the_page(client: httpx.AsyncClient) -> None:
    await converse(client, "ui-8")
    await say(client, "ui-8", "What was the <script>alert(1)</script> budget we agreed on?")
    html = (await client.get("/ui/sessions/ui-8")).text
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)" in html


async def test_the_list_shows_the_callers_sessions_newest_first(
    client: httpx.AsyncClient, ctx: ServiceContext
) -> None:
    for session in ("a-old", "z-new"):  # the ids sort the other way round
        await say(client, session, "hello")
    async with ctx.database.transaction() as db:  # one test transaction: one now()
        await db.execute(
            update(SessionRow)
            .where(SessionRow.id == "local/a-old")
            .values(updated_at=SessionRow.updated_at - timedelta(hours=1))
        )
    html = (await client.get("/ui/")).text
    assert html.index("/ui/sessions/z-new") < html.index("/ui/sessions/a-old")
    empty = await client.get("/ui/", params={"page": 50})
    assert 'id="no-sessions"' in empty.text


async def test_with_keys_a_page_asks_for_a_login_and_the_cookie_opens_it(
    ctx: ServiceContext, client: httpx.AsyncClient
) -> None:
    key = await create_key(ctx, "acme", ["memory:read", "memory:write"])
    body = turn_body(user(FACT), **WINDOW)
    headers = {"Authorization": f"Bearer {key}"}
    assert (await client.post("/sessions/k-1/turn", json=body, headers=headers)).status_code == 200
    page = await client.get("/ui/sessions/k-1")
    assert page.status_code == 303
    assert page.headers["location"] == "/ui/login?next=/ui/sessions/k-1"
    call = await client.post("/ui/sessions/k-1/trace", json={"text": "budget"}, headers=UI)
    assert call.status_code == 401
    wrong = await client.post("/ui/login", data={"key": "ebt_wrong", "next": "/ui/"})
    assert wrong.status_code == 401 and "unknown or revoked" in wrong.text
    assert LOGIN_COOKIE not in wrong.cookies
    login = await client.post("/ui/login", data={"key": key, "next": "/ui/sessions/k-1"})
    assert login.status_code == 303 and login.headers["location"] == "/ui/sessions/k-1"
    cookie = login.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    assert key not in cookie  # the cookie holds a login token, never the key
    opened = await client.get("/ui/sessions/k-1")
    assert opened.status_code == 200 and "12,400 dollars" in opened.text
    await revoke_key(ctx, key)
    assert (await client.get("/ui/sessions/k-1")).status_code == 303  # revoked: at once


async def test_logout_ends_the_login_only_with_the_pages_csrf_token(
    ctx: ServiceContext, client: httpx.AsyncClient
) -> None:
    key = await create_key(ctx, "acme", ["memory:read", "memory:write"])
    await client.post("/ui/login", data={"key": key})
    token = client.cookies[LOGIN_COOKIE]
    page = (await client.get("/ui/")).text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf is not None
    forged = await client.post("/ui/logout", data={"csrf": "guessed"})  # another site's form
    assert forged.status_code == 403
    assert (await client.get("/ui/")).status_code == 200  # still logged in
    out = await client.post("/ui/logout", data={"csrf": csrf.group(1)})
    assert out.status_code == 303 and out.headers["location"] == "/ui/login"
    client.cookies.set(LOGIN_COOKIE, token, path="/ui")  # the old cookie, kept by someone
    assert (await client.get("/ui/")).status_code == 303  # ended for good


async def test_another_tenants_key_sees_none_of_its_sessions(
    ctx: ServiceContext, client: httpx.AsyncClient
) -> None:
    acme = await create_key(ctx, "acme", ["memory:read", "memory:write"])
    globex = await create_key(ctx, "globex", ["memory:read"])
    body = turn_body(user(FACT), **WINDOW)
    headers = {"Authorization": f"Bearer {acme}"}
    assert (
        await client.post("/sessions/shared/turn", json=body, headers=headers)
    ).status_code == 200
    await client.post("/ui/login", data={"key": globex})
    page = await client.get("/ui/sessions/shared")
    assert page.status_code == 404 and "12,400" not in page.text
    assert "/ui/sessions/shared" not in (await client.get("/ui/")).text
    for path, payload in (("trace", {"text": "budget"}), ("recall", {"query": "budget"})):
        call = await client.post(f"/ui/sessions/shared/{path}", json=payload, headers=UI)
        assert call.status_code == 404 and call.json()["error"]["code"] == "session_not_found"


async def test_in_development_mode_the_login_form_is_skipped(client: httpx.AsyncClient) -> None:
    response = await client.get("/ui/login", params={"next": "/ui/sessions/x"})
    assert response.status_code == 303 and response.headers["location"] == "/ui/sessions/x"


async def test_a_key_without_the_read_scope_cannot_log_in(
    ctx: ServiceContext, client: httpx.AsyncClient
) -> None:
    writer = await create_key(ctx, "acme", ["memory:write"])
    refused = await client.post("/ui/login", data={"key": writer})
    assert refused.status_code == 401 and "memory:read" in refused.text


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/", "/sessions/x"])
async def test_the_login_never_redirects_outside_the_inspector(
    ctx: ServiceContext, client: httpx.AsyncClient, target: str
) -> None:
    key = await create_key(ctx, "acme", ["memory:read"])
    response = await client.post("/ui/login", data={"key": key, "next": target})
    assert response.status_code == 303 and response.headers["location"] == "/ui/"


async def test_old_events_without_the_new_fields_still_draw(
    client: httpx.AsyncClient, ctx: ServiceContext
) -> None:
    await converse(client, "ui-9")
    async with ctx.database.transaction() as db:
        db.add(EventRow(session_id="local/ui-9", turn=11, kind="turn", payload={"level": "normal"}))
    html = (await client.get("/ui/sessions/ui-9")).text
    assert len(re.findall(r'<circle class="turn-point', html)) == 11


async def test_a_session_without_notes_says_why(client: httpx.AsyncClient) -> None:
    await say(client, "ui-quiet", "Hello there, lovely weather this morning.")
    html = (await client.get("/ui/sessions/ui-quiet")).text
    assert 'id="notes">No notes yet: none of the 1 messages from the user' in html
    assert "a fact the notes keep." in html
    await say(client, "ui-said", "The vendor is Kessler Logistics.")
    html = (await client.get("/ui/sessions/ui-said")).text
    assert "No notes yet" not in html and "vendor: Kessler Logistics" in html


async def test_every_inspector_answer_is_framed_by_no_one_and_runs_only_its_own_scripts(
    client: httpx.AsyncClient,
) -> None:
    await converse(client, "guarded")
    for path in ("/ui/", "/ui/sessions/guarded", "/ui/login", "/ui/static/inspector.js"):
        answer = await client.get(path)
        assert answer.status_code in (200, 303), path
        csp = answer.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, path
        assert answer.headers["x-frame-options"] == "DENY", path
        assert answer.headers["referrer-policy"] == "no-referrer", path
    api = await client.get("/healthz")
    assert "x-frame-options" not in api.headers  # the API's answers are not pages
