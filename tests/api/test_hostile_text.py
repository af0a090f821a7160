"""Hostile input at every operation of a running `ebbtide serve`: arbitrary Unicode (NUL and
lone UTF-16 surrogates among it) in every text field, path and query parameter, and integers
far past what a column holds. Never a 5xx; every 4xx carries the error body; a refused
request writes nothing. The server's log is checked for tracebacks when it stops."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.live import LiveServer
from tests.builders import words

SESSION = "hostile"
UNSTORABLE = ("\x00", "\ud800", "\udfff", "\udbff\udbff")
ANY_CHARACTER = st.characters(exclude_categories=())  # surrogates (Cs) included
HOSTILE_TEXT = st.one_of(
    st.text(ANY_CHARACTER, max_size=24),
    st.builds(
        lambda head, bad, tail: head + bad + tail,
        st.text(ANY_CHARACTER, max_size=8),
        st.sampled_from(UNSTORABLE),
        st.text(ANY_CHARACTER, max_size=8),
    ),
)
HUGE = st.one_of(st.integers(), st.integers(min_value=2**31 - 2, max_value=2**64))


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: Any = None


def in_path(text: str) -> str:
    """Percent-encoded as a client would send it; a lone surrogate goes as its raw bytes."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def turn(**message: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "hello", **message}]}


def tool_round(call_id: str) -> dict[str, Any]:
    call = {"id": call_id, "function": {"name": "lookup", "arguments": "{}"}}
    return {
        "messages": [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": "found"},
        ]
    }


def memory(**call: Any) -> Request:
    return Request("POST", f"/sessions/{SESSION}/memory", call)


OPERATIONS: dict[str, Callable[[str, int], Request]] = {
    "turn content": lambda t, n: Request("POST", f"/sessions/{SESSION}/turn", turn(content=t)),
    "turn name": lambda t, n: Request("POST", f"/sessions/{SESSION}/turn", turn(name=t)),
    "turn system": lambda t, n: Request(
        "POST", f"/sessions/{SESSION}/turn", {**turn(), "system": t}
    ),
    "turn model": lambda t, n: Request("POST", f"/sessions/{SESSION}/turn", {**turn(), "model": t}),
    "turn tool_call_id": lambda t, n: Request("POST", f"/sessions/{SESSION}/turn", tool_round(t)),
    "turn tools": lambda t, n: Request(
        "POST", f"/sessions/{SESSION}/turn", {**turn(), "tools": [{"name": t, "x": [t]}]}
    ),
    "turn observed tokens": lambda t, n: Request(
        "POST", f"/sessions/{SESSION}/turn", {**turn(), "observed_prompt_tokens": n}
    ),
    "recall query": lambda t, n: Request("POST", f"/sessions/{SESSION}/recall", {"query": t}),
    "recall top_k": lambda t, n: Request(
        "POST", f"/sessions/{SESSION}/recall", {"query": "budget", "top_k": n}
    ),
    "remember text": lambda t, n: Request("POST", f"/sessions/{SESSION}/remember", {"text": t}),
    "remember tags": lambda t, n: Request(
        "POST", f"/sessions/{SESSION}/remember", {"text": "keep it", "tags": [t]}
    ),
    "memory recall": lambda t, n: memory(type="recall", query=t),
    "memory remember": lambda t, n: memory(type="remember", text=t, tags=[t]),
    "memory forget chunk": lambda t, n: memory(type="forget", chunk_id=t),
    "memory forget confirm": lambda t, n: memory(type="forget", confirm=t),
    "memory forget range": lambda t, n: memory(type="forget", turn_start=n, turn_end=n),
    "memory offload": lambda t, n: memory(type="offload", until_tokens=n),
    "events kind": lambda t, n: Request("GET", f"/sessions/{SESSION}/events?kind={in_path(t)}"),
    "events after": lambda t, n: Request("GET", f"/sessions/{SESSION}/events?after={n}"),
    "chunk id": lambda t, n: Request("GET", f"/sessions/{SESSION}/chunks/{in_path(t)}"),
    "session id": lambda t, n: Request("GET", f"/sessions/{in_path(t)}/status"),
}


def row_counts(connection: psycopg.Connection[Any]) -> dict[str, int]:
    tables = [
        row[0]
        for row in connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        )
    ]
    return {
        table: int(connection.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])  # type: ignore[index]
        for table in tables
    }


@pytest.fixture(scope="module")
def hostile(
    keys_and_server: tuple[LiveServer, dict[str, str]],
) -> Iterator[tuple[httpx.Client, psycopg.Connection[Any]]]:
    """A client with every scope, on a session with an archive, and a connection to count
    rows with."""
    live, keys = keys_and_server
    headers = {"Authorization": f"Bearer {keys['full']}", "Content-Type": "application/json"}
    with (
        httpx.Client(base_url=live.base, headers=headers, timeout=60) as client,
        psycopg.connect(live.database_url.replace("+psycopg", ""), autocommit=True) as db,
    ):
        for t in range(20):  # enough to offload: forget and recall reach real chunks
            body = {**turn(content=f"turn {t} " + words(80)), "context_window": 2048}
            assert client.post(f"/sessions/{SESSION}/turn", json=body).status_code == 200
        yield client, db


@given(operation=st.sampled_from(sorted(OPERATIONS)), text=HOSTILE_TEXT, number=HUGE)
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,  # the same examples on every run
)
def test_hostile_input_never_gets_a_5xx_and_a_refusal_writes_nothing(
    hostile: tuple[httpx.Client, psycopg.Connection[Any]], operation: str, text: str, number: int
) -> None:
    client, db = hostile
    request = OPERATIONS[operation](text, number)
    before = row_counts(db)
    # ensure_ascii: a lone surrogate travels as its \\u escape, as JavaScript clients send it
    content = None if request.body is None else json.dumps(request.body).encode()
    response = client.request(request.method, request.path, content=content)
    assert response.status_code < 500, (operation, repr(text), number, response.text)
    if response.status_code >= 400:
        error = response.json()["error"]
        assert error["code"] and error["message"], response.text
        assert row_counts(db) == before, (operation, repr(text), number)


@pytest.mark.parametrize("bad", UNSTORABLE, ids=["nul", "low", "high", "pair-of-highs"])
def test_unstorable_text_is_refused_with_422_naming_the_field(
    hostile: tuple[httpx.Client, psycopg.Connection[Any]], bad: str
) -> None:
    client, _ = hostile
    body = json.dumps({"messages": [{"role": "user", "content": f"hi {bad}"}]}).encode()
    response = client.post(f"/sessions/{SESSION}/turn", content=body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["details"]["problems"][0]["field"] == "messages.0.content"
    assert "must not contain" in error["message"]


def test_refused_text_never_reaches_the_log(
    keys_and_server: tuple[LiveServer, dict[str, str]],
    hostile: tuple[httpx.Client, psycopg.Connection[Any]],
) -> None:
    live, _ = keys_and_server
    client, _ = hostile
    secret = "Quillfeather-9921"
    for bad in UNSTORABLE:
        body = json.dumps(turn(content=f"the vault code is {secret} {bad}")).encode()
        assert client.post(f"/sessions/{SESSION}/turn", content=body).status_code == 422
    assert secret not in live.log.read_text()
