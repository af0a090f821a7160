"""`ebbtide serve` as `make run` starts it: embedded Postgres, migrations, HTTP on loopback."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.api.live import LiveServer, serving


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


def test_with_keys_the_docs_and_the_schema_are_not_served(
    keys_and_server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, _ = keys_and_server
    for path in ("/docs", "/redoc", "/openapi.json"):
        response = httpx.get(f"{live.base}{path}")
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "not_found"
