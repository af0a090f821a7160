"""The adapters' tests talk to a real `ebbtide serve` over loopback, so that they run both here
and in an environment that holds only the client and the oldest framework releases Ebbtide
supports (`oldest.txt`, run by `test_oldest_releases.py`): there `EBBTIDE_TEST_URL` names the
server; here a live server on a database of its own is started for them."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

SERVER_VARIABLE = "EBBTIDE_TEST_URL"


@pytest.fixture(scope="session")
def ebbtide_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    given = os.environ.get(SERVER_VARIABLE)
    if given:
        yield given
        return
    # Only in the project's own environment: the oldest releases' one has no `app`.
    from tests.api.live import fresh_named_database, live_server

    database_url = request.getfixturevalue("database_url")
    log = tmp_path_factory.mktemp("adapters") / "serve.log"
    with (
        fresh_named_database(database_url, "ebbtide_adapters") as url,
        live_server(url, log) as live,
    ):
        yield live.base
