"""Observability (docs/DESIGN.md §9): after a scripted conversation that offloads and recalls,
every metric has new samples, labels carry no ids, the dashboard queries only metrics that
exist, every turn has its event with the fields the failure analysis needs, and each request
logs one line without the conversation's text."""

from __future__ import annotations

import json
import logging
import re
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.logs import JsonFormatter, TextFormatter
from app.main import create_app
from app.providers.fakes import DownEmbedder
from app.services.context import ServiceContext
from tests.api.live import LiveServer
from tests.api.test_mcp import SECRET, converse
from tests.builders import turn_body, user, words
from tests.conftest import make_settings

LOG_WAIT_S = 5.0  # how long a request's log line may trail its answer

ROOT = Path(__file__).resolve().parents[2]
SESSION = "obs-1"
EVENT_FIELDS = {"trigger_ratio", "timings_ms", "fallback_flag"}
OFFLOAD_FIELDS = {"tokens_freed", "chunks_offloaded"}
RECALL_FIELDS = {"query_raw", "query_rewritten", "recall_ids", "rerank_scores", "final_k"}

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(client: httpx.AsyncClient) -> Samples:
    text = (await client.get("/metrics")).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def grew(before: Samples, after: Samples, name: str, **labels: str) -> float:
    """How much the samples called `name` (with these labels) grew in total."""

    def total(samples: Samples) -> float:
        return sum(
            value
            for (sample, sample_labels), value in samples.items()
            if sample == name and set(labels.items()) <= set(sample_labels)
        )

    return total(after) - total(before)


async def scripted_conversation(ctx: ServiceContext, client: httpx.AsyncClient) -> int:
    """Offloads, recalls (hit: a detail only the archive holds; miss: a remark about nothing
    said; skipped: the password the notes hold; fallback): returns the number of turns."""
    bodies = [turn_body(user(SECRET), context_window=4000)]
    bodies.append(turn_body(user("Priya set up the staging replica in Lisbon after the outage.")))
    bodies += [turn_body(user(f"turn {t} " + words(60, f"chat{t}w"))) for t in range(40)]
    bodies.append(turn_body(user("Where did Priya set up the staging replica?")))
    bodies.append(turn_body(user("Pelicans never play the saxophone in a marmalade quartet.")))
    bodies.append(turn_body(user("What was the Zorblax-4471 password again?"), recall="force"))
    reported = {"observed_prompt_tokens": 900, "observed_cached_tokens": 800}
    bodies.append(turn_body(user("note"), recall="off", **reported))
    for body in bodies:
        assert (await client.post(f"/sessions/{SESSION}/turn", json=body)).status_code == 200
    working = ctx.embedder
    ctx.embedder = DownEmbedder()
    try:
        down = turn_body(user("the Zorblax-4471 password, please"), recall="force")
        assert (await client.post(f"/sessions/{SESSION}/turn", json=down)).status_code == 200
    finally:
        ctx.embedder = working
    return len(bodies) + 1


async def test_every_metric_grows_and_no_label_names_a_session(
    ctx: ServiceContext, client: httpx.AsyncClient
) -> None:
    before = await scrape(client)
    turns = await scripted_conversation(ctx, client)
    after = await scrape(client)

    for name in (
        "ebbtide_offloads_total",
        "ebbtide_offload_freed_tokens_total",
        "ebbtide_chunks_offloaded_total",
        "ebbtide_watermark_ratio_count",
        "ebbtide_prompt_tokens_count",
        "ebbtide_recall_injected_tokens_count",
        "ebbtide_recall_final_k_count",
        "ebbtide_rerank_top_score_count",
        "ebbtide_notes_rebuilds_total",
        "ebbtide_turn_seconds_count",
        "ebbtide_provider_prompt_tokens_total",
        "ebbtide_provider_cached_prompt_tokens_total",
    ):
        assert grew(before, after, name) > 0, name
    assert grew(before, after, "ebbtide_turns_total", level="normal") > 0
    assert grew(before, after, "ebbtide_turns_total", level="offload") > 0
    for outcome in ("hit", "miss", "skipped", "fallback"):
        assert grew(before, after, "ebbtide_recall_outcomes_total", outcome=outcome) > 0, outcome
    for stage in ("tokenize", "embed", "search", "rerank", "notes", "assemble", "db"):
        assert grew(before, after, "ebbtide_stage_seconds_count", stage=stage) > 0, stage
    assert grew(before, after, "ebbtide_fallbacks_total", reason="embedder_unavailable") > 0
    turn_route = {"route": "/sessions/{session_id}/turn", "method": "POST"}
    assert grew(before, after, "ebbtide_http_requests_total", status="200", **turn_route) == turns
    assert grew(before, after, "ebbtide_http_request_seconds_count", **turn_route) == turns

    label_values = {value for _, labels in after for _, value in labels}
    assert not any(SESSION in value or value == "local" for value in label_values)


def dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads((ROOT / "deploy/grafana/dashboards/ebbtide.json").read_text())
    return [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p["targets"]]


async def test_the_dashboard_queries_only_metrics_that_exist(
    ctx: ServiceContext, client: httpx.AsyncClient
) -> None:
    await scripted_conversation(ctx, client)
    exposed = {name for name, _ in await scrape(client)}
    queried = {
        name for _, expr in dashboard_queries() for name in re.findall(r"\bebbtide_\w+", expr)
    }
    assert queried and queried <= exposed, queried - exposed
    titles = " ".join(title for title, _ in dashboard_queries()).lower()
    for topic in (
        "watermark",
        "offloads",
        "tokens freed",
        "hit rate",
        "p50",
        "p95",
        "fallbacks",
        "error rate",
        "prompt and injected tokens",
        "whole-turn latency",
        "embedding queue",
        "embedding lag",
    ):
        assert topic in titles, topic


def test_every_dashboard_query_is_scoped_by_the_job_and_instance_variables() -> None:
    dashboard = json.loads((ROOT / "deploy/grafana/dashboards/ebbtide.json").read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(variables) == {"job", "instance"}
    assert all(v["includeAll"] and v["type"] == "query" for v in variables.values())
    assert "$job" in variables["instance"]["query"]["query"]  # instances of the chosen jobs
    for title, expr in dashboard_queries():
        for selector in re.findall(r"\bebbtide_\w+(\{[^}]*\})?", expr):
            assert 'job=~"$job"' in selector and 'instance=~"$instance"' in selector, title


async def test_every_turn_has_its_event_with_the_seeds_fields_paged(
    ctx: ServiceContext, client: httpx.AsyncClient
) -> None:
    turns = await scripted_conversation(ctx, client)
    events, after = [], 0
    while True:
        page = (await client.get(f"/sessions/{SESSION}/events?after={after}&limit=10")).json()
        events += page["events"]
        if page["next_after"] is None:
            break
        after = page["next_after"]
    turn_events = [e for e in events if e["kind"] == "turn"]
    assert [e["turn"] for e in turn_events] == list(range(1, turns + 1))
    for event in turn_events:
        payload = event["payload"]
        assert set(payload) >= EVENT_FIELDS and set(payload["offload"]) >= OFFLOAD_FIELDS
        assert set(payload["recall"]) >= RECALL_FIELDS
    hit = next(e for e in turn_events if e["payload"]["recall"]["recall_ids"])
    assert hit["payload"]["recall"]["final_k"] == len(hit["payload"]["recall"]["rerank_scores"])
    only_turns = (await client.get(f"/sessions/{SESSION}/events?kind=turn&limit=500")).json()
    assert len(only_turns["events"]) == turns and only_turns["next_after"] is None
    missing = await client.get("/sessions/nobody/events")
    assert missing.status_code == 404


async def test_each_request_logs_one_line_with_its_id_and_no_message_text(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ebbtide.request")
    body = turn_body(user(SECRET), context_window=4000)
    given = await client.post("/sessions/logs/turn", json=body, headers={"X-Request-Id": "abc-1"})
    made = await client.post("/sessions/logs/turn", json=body, headers={"X-Request-Id": "bad id!"})
    assert given.headers["x-request-id"] == "abc-1"
    assert re.fullmatch(r"[0-9a-f]{32}", made.headers["x-request-id"])
    lines = [r for r in caplog.records if r.name == "ebbtide.request"]
    assert [r.fields["request_id"] for r in lines] == ["abc-1", made.headers["x-request-id"]]  # type: ignore[attr-defined]
    assert lines[0].fields["route"] == "/sessions/{session_id}/turn"  # type: ignore[attr-defined]
    assert lines[0].fields["status"] == 200 and lines[0].fields["tenant"] == "local"  # type: ignore[attr-defined]
    assert "Zorblax" not in caplog.text
    for record in lines:
        assert "Zorblax" not in JsonFormatter().format(record)


async def test_debug_content_logs_the_body(
    ctx: ServiceContext, caplog: pytest.LogCaptureFixture
) -> None:
    ctx.settings = make_settings(log={"debug_content": True})
    transport = httpx.ASGITransport(app=create_app(context=ctx))
    caplog.set_level(logging.INFO, logger="ebbtide.request")
    async with httpx.AsyncClient(transport=transport, base_url="http://ebbtide.test") as client:
        await client.post("/sessions/dbg/turn", json=turn_body(user(SECRET), context_window=4000))
    [line] = [r for r in caplog.records if r.name == "ebbtide.request"]
    assert SECRET in line.fields["body"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("formatter", [JsonFormatter, TextFormatter])
def test_formats_carry_the_fields(formatter: Callable[[], logging.Formatter]) -> None:
    record = logging.LogRecord("ebbtide.request", logging.INFO, __file__, 1, "request", (), None)
    record.fields = {"request_id": "r1", "status": 200}
    line = formatter().format(record)
    if formatter is JsonFormatter:
        assert json.loads(line) | {"ts": None} == {
            "ts": None,
            "level": "info",
            "logger": "ebbtide.request",
            "msg": "request",
            "request_id": "r1",
            "status": 200,
        }
    else:
        assert line.endswith("request request_id=r1 status=200")


def test_the_live_server_writes_json_lines_without_the_text(
    keys_and_server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, keys = keys_and_server
    converse(live.base, keys["full"], "obs-live")
    # A request's line is written once its answer has gone out: the last may trail it.
    deadline = time.monotonic() + LOG_WAIT_S
    while True:
        text = live.log.read_text()
        lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        routes: defaultdict[str, int] = defaultdict(int)
        for line in lines:
            if line["msg"] == "request":
                routes[line["route"]] += 1
                assert line["request_id"]
            if line.get("route") == "/sessions/{session_id}/turn" and line["status"] == 200:
                assert line["tenant"] == "acme"  # the server's turns are all acme's
        if routes["/sessions/{session_id}/turn"] >= 41 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert routes["/sessions/{session_id}/turn"] >= 41
    assert "Zorblax" not in text
