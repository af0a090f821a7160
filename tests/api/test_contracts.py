"""Contract files: the committed OpenAPI schema is current; the container files are sound.
There is no Docker engine on the build machines, so the compose stack is checked by shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from app.cli import write_openapi

ROOT = Path(__file__).resolve().parents[2]


def test_committed_openapi_schema_is_current(tmp_path: Path) -> None:
    fresh = tmp_path / "openapi.json"
    write_openapi(fresh)
    committed = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    assert json.loads(fresh.read_text()) == committed, "stale: run `make openapi`"
    assert {
        "/sessions/{session_id}/turn",
        "/sessions/{session_id}/status",
        "/sessions/{session_id}/chunks/{chunk_id}",
        "/healthz",
        "/readyz",
        "/metrics",
    } <= set(committed["paths"])
    turn = committed["paths"]["/sessions/{session_id}/turn"]["post"]
    assert {"200", "400", "404", "409", "413", "422", "503"} <= set(turn["responses"])


def load_compose() -> dict[str, Any]:
    compose: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return compose


def test_compose_runs_pgvector_postgres_16_with_a_named_volume() -> None:
    compose = load_compose()
    db = compose["services"]["db"]
    assert db["image"].startswith("pgvector/pgvector:pg16")
    volume, target = db["volumes"][0].split(":")
    assert volume in compose["volumes"] and target == "/var/lib/postgresql/data"
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])


def test_compose_app_uses_the_db_service_and_publishes_on_loopback() -> None:
    compose = load_compose()
    app = compose["services"]["app"]
    assert app["build"] == "."
    assert "@db:5432/" in app["environment"]["DATABASE_URL"]
    assert app["depends_on"]["db"]["condition"] == "service_healthy"
    assert app["ports"] == ["127.0.0.1:8000:8000"]


def test_dockerfile_is_multi_stage_non_root_with_a_healthcheck() -> None:
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    assert sum(line.startswith("FROM ") for line in lines) >= 2
    assert any(line.startswith("USER ") and "root" not in line for line in lines)
    assert any(line.startswith("HEALTHCHECK") for line in lines)
    assert any("/healthz" in line for line in lines)
    assert lines[-1] == 'CMD ["ebbtide", "serve"]'
