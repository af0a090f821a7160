"""Contract files: the committed OpenAPI schema is current; the container files are sound.
There is no Docker engine on the build machines, so the compose stack is checked by shape."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from app.cli import write_openapi
from app.store.distribution import citus_statements

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
        "/sessions/{session_id}/events",
        "/sessions/{session_id}/recall",
        "/sessions/{session_id}/remember",
        "/sessions/{session_id}/memory",
        "/tools/memory",
        "/healthz",
        "/readyz",
        "/metrics",
    } <= set(committed["paths"])
    turn = committed["paths"]["/sessions/{session_id}/turn"]["post"]
    assert {"200", "400", "404", "409", "413", "422", "503"} <= set(turn["responses"])


def load_compose() -> dict[str, Any]:
    compose: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return compose


def test_compose_runs_pgvector_postgres_18_with_a_named_volume() -> None:
    compose = load_compose()
    db = compose["services"]["db"]
    assert db["image"] == "pgvector/pgvector:0.8.1-pg18"  # the embedded engine's versions
    volume, target = db["volumes"][0].split(":")
    assert volume in compose["volumes"] and target == "/var/lib/postgresql"
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])


def test_compose_app_uses_the_db_service_and_publishes_on_loopback() -> None:
    compose = load_compose()
    app = compose["services"]["app"]
    assert app["build"] == "."
    assert "@db:5432/" in app["environment"]["DATABASE_URL"]
    assert app["depends_on"]["db"]["condition"] == "service_healthy"
    assert app["ports"] == ["127.0.0.1:8000:8000"]
    assert app["restart"] == "unless-stopped"


def test_dockerfile_is_multi_stage_non_root_with_a_healthcheck() -> None:
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    assert sum(line.startswith("FROM ") for line in lines) >= 2
    assert any(line.startswith("USER ") and "root" not in line for line in lines)
    assert any(line.startswith("HEALTHCHECK") for line in lines)
    assert any("/healthz" in line for line in lines)
    assert lines[-1] == 'CMD ["ebbtide", "serve"]'
    # The runtime stage copies the built virtualenv (the locked packages and the wheel) and
    # none of the source tree; the build stage installs from the lock.
    runtime = lines[max(i for i, line in enumerate(lines) if line.startswith("FROM ")) :]
    copied = [line.split()[-2] for line in runtime if line.startswith("COPY ")]
    assert copied == ["/opt/ebbtide"], copied
    assert any("-r requirements/run.txt" in line for line in lines)


def test_compose_scrapes_the_app_with_prometheus() -> None:
    compose = load_compose()
    prometheus = compose["services"]["prometheus"]
    assert prometheus["image"].startswith("prom/prometheus:")
    mounts = dict(volume.split(":", 1) for volume in prometheus["volumes"])
    config_file = mounts["./deploy/prometheus/prometheus.yml"].removesuffix(":ro")
    assert f"--config.file={config_file}" in prometheus["command"]
    assert mounts["promdata"] == "/prometheus" and "promdata" in compose["volumes"]
    assert prometheus["ports"] == ["127.0.0.1:9090:9090"]
    config = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    [job] = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == [
        f"app:{compose['services']['app']['environment']['PORT']}"
    ]


def test_compose_provisions_grafana_with_the_datasource_and_the_dashboard() -> None:
    compose = load_compose()
    grafana = compose["services"]["grafana"]
    assert grafana["image"].startswith("grafana/grafana:")
    assert grafana["ports"] == ["127.0.0.1:3000:3000"] and "grafanadata" in compose["volumes"]
    mounts = {
        source: target.removesuffix(":ro")
        for source, target in (volume.split(":", 1) for volume in grafana["volumes"])
    }
    assert mounts["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
    provisioning = ROOT / "deploy/grafana/provisioning"
    [source] = yaml.safe_load((provisioning / "datasources/prometheus.yml").read_text())[
        "datasources"
    ]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    [provider] = yaml.safe_load((provisioning / "dashboards/ebbtide.yml").read_text())["providers"]
    assert mounts["./deploy/grafana/dashboards"] == provider["options"]["path"]
    dashboard = json.loads((ROOT / "deploy/grafana/dashboards/ebbtide.json").read_text())
    assert dashboard["uid"] == "ebbtide" and dashboard["panels"]
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == source["uid"] and panel["targets"], panel["title"]


def test_the_image_and_the_compose_app_log_json() -> None:
    assert load_compose()["services"]["app"]["environment"]["EBBTIDE_LOG__FORMAT"] == "json"
    env = [
        line for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("ENV ")
    ]
    assert any("EBBTIDE_LOG__FORMAT=json" in line.split() for line in env)


def test_the_citus_compose_runs_a_coordinator_and_two_workers_with_pgvector() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.citus.yml").read_text())
    services = compose["services"]
    nodes = {name: s for name, s in services.items() if s.get("build") == "deploy/citus"}
    assert set(nodes) == {"coordinator", "worker1", "worker2", "cluster"}
    dockerfile = (ROOT / "deploy/citus/Dockerfile").read_text()
    assert "FROM citusdata/citus:12." in dockerfile and "postgresql-16-pgvector" in dockerfile
    for name in ("coordinator", "worker1", "worker2"):
        node = nodes[name]
        volume, target = node["volumes"][0].split(":")
        assert volume in compose["volumes"] and target == "/var/lib/postgresql/data"
        assert "citus.propagate_set_commands=local" in node["command"]
        assert "pg_isready" in " ".join(node["healthcheck"]["test"])
        assert "ports" not in node  # trusted on the compose network only
    # the one-shot job adds exactly the worker services to the coordinator
    cluster = services["cluster"]
    assert cluster["restart"] == "no" and "/cluster.sql" in cluster["command"]
    script = (ROOT / "deploy/citus/cluster.sql").read_text()
    assert set(re.findall(r"\('(worker\d+)'\)", script)) == {"worker1", "worker2"}
    assert "citus_set_coordinator_host('coordinator'" in script and "vector" in script
    assert {n: c["condition"] for n, c in cluster["depends_on"].items()} == {
        name: "service_healthy" for name in ("coordinator", "worker1", "worker2")
    }


def test_the_citus_compose_distributes_before_serving_and_embeds_apart() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.citus.yml").read_text())["services"]
    app, embedder = services["app"], services["embedder"]
    assert app["depends_on"]["cluster"]["condition"] == "service_completed_successfully"
    assert app["command"][-1] == "ebbtide distribute && exec ebbtide serve"
    assert app["ports"] == ["127.0.0.1:8000:8000"]
    for service in (app, embedder):
        assert "@coordinator:5432/" in service["environment"]["DATABASE_URL"]
    assert app["environment"]["EBBTIDE_EMBEDDER__WORKER"] == "false"
    assert embedder["command"] == ["ebbtide", "worker"]


def test_scaling_doc_lists_the_calls_ebbtide_distribute_makes() -> None:
    """docs/SCALING.md cannot drift from the schema: it shows exactly these calls."""
    doc = (ROOT / "docs/SCALING.md").read_text()
    shown = [line for line in doc.splitlines() if "create_" in line and line.startswith("SELECT")]
    assert shown == citus_statements()
