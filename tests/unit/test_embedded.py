"""URLs of the embedded Postgres (no server needed)."""

from __future__ import annotations

from app.store.embedded import url_of_database


def test_the_url_of_another_database_keeps_the_server_part() -> None:
    assert url_of_database("postgresql://u:@/postgres?host=/tmp/pg", "other") == (
        "postgresql://u:@/other?host=/tmp/pg"
    )
    assert url_of_database("postgresql://u@db:5432/ebbtide", "x") == "postgresql://u@db:5432/x"
