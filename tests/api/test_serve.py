"""`ebbtide serve` as `make run` starts it: embedded Postgres, migrations, HTTP on loopback."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import httpx
import pytest

from app.cli import main, serve_settings
from tests.api.live import LiveServer, serving
from tests.conftest import make_settings


def test_serve_starts_embedded_postgres_migrates_and_answers_turns(tmp_path: Path) -> None:
    with serving({"EBBTIDE_DATA_DIR": str(tmp_path / "data")}, tmp_path / "serve.log") as base:
        response = httpx.post(
            f"{base}/sessions/e2e/turn",
            timeout=30,
            json={"messages": [{"role": "user", "content": "只查华东仓"}], "model": "qwen-plus"},
        )
        assert response.status_code == 200, response.text
        assert response.json()["usage"]["context_window"] == 131_072
        assert (tmp_path / "data" / "pg" / "PG_VERSION").exists()
        # development mode (no key): the interactive docs are served
        assert httpx.get(f"{base}/docs").status_code == 200
        assert httpx.get(f"{base}/openapi.json").status_code == 200
        assert httpx.get(f"{base}/ui/").status_code == 200
    said = (tmp_path / "serve.log").read_text()
    data = tmp_path.resolve() / "data" / "pg"
    for line in (
        f"ebbtide: data: embedded Postgres in {data}",
        "ebbtide: API keys off (development mode, loopback only)",
        "ebbtide: embedder multilingual-e5-small-q4 (local); offloads queue their embedding for a "
        "worker in this process",
        "ebbtide: proxy: /v1/chat/completions to https://api.openai.com/v1, /v1/messages to "
        "https://api.anthropic.com",
        f"ebbtide: inspector {base}/ui/, API docs {base}/docs",
        f"ebbtide: serving on {base}",
    ):
        assert line in said, line
    engine_line = next(x for x in said.splitlines() if x.startswith('ebbtide: {"engine"'))
    engine = json.loads(engine_line.removeprefix("ebbtide: "))["engine"]  # as /readyz says it
    assert engine["postgres"].startswith("18.") and engine["lexical"] == "tsvector"
    # pgserver's initdb output, its pg_ctl calls and alembic's plugin lines stay out
    for chatter in ("initdb", "Running commandline", "setup plugin", "XDG_RUNTIME_DIR"):
        assert chatter not in said, chatter


def test_with_keys_the_docs_and_the_schema_are_not_served(
    keys_and_server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, _ = keys_and_server
    for path in ("/docs", "/redoc", "/openapi.json"):
        response = httpx.get(f"{live.base}{path}")
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "not_found"
    said = live.log.read_text()
    assert "ebbtide: API keys on: every call needs one" in said
    assert f"ebbtide: inspector {live.base}/ui/, API docs off (EBBTIDE_DOCS=true)" in said


def test_serve_options_take_the_place_of_the_environment(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    shown = capsys.readouterr().out
    assert all(option in shown for option in ("--host", "--port", "--data-dir"))
    settings = make_settings()
    args = argparse.Namespace(host="0.0.0.0", port=9001, data_dir=None)
    chosen = serve_settings(settings, args)
    assert (chosen.host, chosen.port, chosen.data_dir) == ("0.0.0.0", 9001, settings.data_dir)
