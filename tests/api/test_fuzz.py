"""Schemathesis against the committed OpenAPI contract: generated requests (valid and not) to a
real `ebbtide serve` on loopback never get a 5xx, and every response matches the schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.store.embedded import drop_database, fresh_database, url_of_database
from tests.api.test_serve import free_loopback_port, wait_until_ready
from tests.conftest import PROJECT_ROOT

EXAMPLES_PER_OPERATION = 40
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def server(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`ebbtide serve` on a database of its own (it commits), with the hash embedder."""
    name = f"ebbtide_fuzz_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    admin = url_of_database(database_url, "postgres")
    port = free_loopback_port()
    env = {
        **os.environ,
        "DATABASE_URL": fresh_database(admin, name),
        "EBBTIDE_EMBEDDER__KIND": "hash",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "EBBTIDE_LOG_LEVEL": "warning",
    }
    log = tmp_path_factory.mktemp("fuzz") / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(base, process, log)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=60)
        drop_database(admin, name)
    assert "Traceback" not in log.read_text(), log.read_text()


contract = schemathesis.openapi.from_dict(
    json.loads((PROJECT_ROOT / "openapi" / "openapi.json").read_text())
)


@contract.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,  # the same examples on every run: CI stays reproducible
)
def test_no_5xx_and_every_response_matches_the_contract(
    case: schemathesis.Case, server: str
) -> None:
    case.call_and_validate(base_url=server, checks=CHECKS, timeout=30)
