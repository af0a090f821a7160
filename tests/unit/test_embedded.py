"""URLs and sizing of the embedded Postgres (no server needed)."""

from __future__ import annotations

from pathlib import Path

from app.store.embedded import (
    SERVER_CONF,
    shared_buffers_mb,
    url_of_database,
    write_server_conf,
)

GIB = 2**30


def test_the_url_of_another_database_keeps_the_server_part() -> None:
    assert url_of_database("postgresql://u:@/postgres?host=/tmp/pg", "other") == (
        "postgresql://u:@/other?host=/tmp/pg"
    )
    assert url_of_database("postgresql://u@db:5432/ebbtide", "x") == "postgresql://u@db:5432/x"


def test_shared_buffers_are_a_quarter_of_memory_within_bounds() -> None:
    assert shared_buffers_mb(4 * GIB) == 1024
    assert shared_buffers_mb(24 * GIB) == 2048  # capped
    assert shared_buffers_mb(256 * 2**20) == 128  # never under Postgres's default


def test_the_server_conf_is_included_once(tmp_path: Path) -> None:
    (tmp_path / "postgresql.conf").write_text("max_connections = 100\n")
    write_server_conf(tmp_path, None)
    write_server_conf(tmp_path, None)  # every start writes it again
    main = (tmp_path / "postgresql.conf").read_text()
    assert main.count(f"include_if_exists = '{SERVER_CONF}'") == 1
    assert (tmp_path / SERVER_CONF).read_text().startswith("shared_buffers = '")
