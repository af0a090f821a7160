"""Schemathesis against the committed OpenAPI contract: generated requests (valid and not) to a
real `ebbtide serve` on loopback never get a 5xx, and every response matches the schema."""

from __future__ import annotations

import json
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

from tests.api.live import fresh_named_database, live_server
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
    log = tmp_path_factory.mktemp("fuzz") / "serve.log"
    with (
        fresh_named_database(database_url, "ebbtide_fuzz") as url,
        live_server(url, log) as live,
    ):
        yield live.base


# The proxy's answers are its upstream's (status, headers, body), which no contract of
# Ebbtide's describes; its own refusals are tested in tests/api/test_proxy.py.
contract = schemathesis.openapi.from_dict(
    json.loads((PROJECT_ROOT / "openapi" / "openapi.json").read_text())
).exclude(tag="proxy")


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
