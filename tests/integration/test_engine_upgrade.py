"""A data folder of the embedded Postgres 16 (the engine of the releases before 18, run
from its own package's binaries, its schema migrated to that release's head) is refused at
start with the command that upgrades it; `ebbtide engine upgrade` moves it to the bundled
Postgres 18 keeping every row, and the next migration brings pgvector to 0.8."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest
from alembic import command
from pgvector.psycopg import register_vector

from app.cli import main
from app.core.lexical import lexical_terms
from app.settings import get_settings
from app.store.database import Database
from app.store.embedded import (
    EmbeddedDataOutdated,
    bundled_major,
    start_embedded,
    stop_embedded,
    url_of_database,
)
from app.store.engine_upgrade import ROOT_SYSTEM_USER, fetch_legacy_bindir
from app.store.migrate import alembic_config, upgrade_head
from app.store.recall import LexicalScan, VectorScan, lexical_candidates, unit_candidates

PROJECT_ROOT = Path(__file__).resolve().parents[2]
LEGACY_CACHE = PROJECT_ROOT / ".ebbtide-test-legacy"  # the old engine's binaries, fetched once
LAST_PG16_REVISION = "0011"  # the schema the last release on Postgres 16 left
SESSION = "local/upgraded"
TEXT = "We agreed the Hartwell venue for the offsite, booked through Kessler."


@pytest.fixture(scope="module")
def legacy_bindir() -> Path:
    bindir = LEGACY_CACHE / "pgserver" / "pginstall" / "bin"
    if not (bindir / "pg_upgrade").exists():
        shutil.rmtree(LEGACY_CACHE, ignore_errors=True)
        LEGACY_CACHE.mkdir(parents=True)
        fetch_legacy_bindir(16, LEGACY_CACHE)
    return bindir


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A short path (sockets live in it) the server's user may enter."""
    path = Path(tempfile.mkdtemp(prefix="eb16-"))
    path.chmod(0o755)
    yield path
    if (path / "pg" / "postmaster.pid").exists():
        stop_embedded(path)
    shutil.rmtree(path, ignore_errors=True)


def _as_server_user(args: list[str]) -> None:
    user = ROOT_SYSTEM_USER if os.geteuid() == 0 else None
    subprocess.run(args, check=True, user=user, capture_output=True)


def _write_pg16_folder(bindir: Path, data_dir: Path) -> list[float]:
    """Creates data_dir/pg as pgserver 0.1.4 did, migrates it to the last Postgres 16
    revision, stores a session with one chunk and its unit; the unit's vector."""
    pgdata = data_dir / "pg"
    if os.geteuid() == 0:
        shutil.chown(data_dir, ROOT_SYSTEM_USER, ROOT_SYSTEM_USER)
    initdb = [str(bindir / "initdb"), "-D", str(pgdata), "-U", "postgres", "--encoding=utf8"]
    _as_server_user([*initdb, "--auth=trust", "--auth-local=trust"])
    pg_ctl = [str(bindir / "pg_ctl"), "-D", str(pgdata), "-w"]
    _as_server_user([*pg_ctl, "-o", f"-h '' -k {data_dir}", "-l", str(data_dir / "log"), "start"])
    vector = np.random.default_rng(7).standard_normal(384).astype(np.float32)
    vector /= np.linalg.norm(vector)
    try:
        admin = f"postgresql://postgres:@/postgres?host={data_dir}"
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute("CREATE DATABASE ebbtide")
        url = url_of_database(admin, "ebbtide")
        command.upgrade(alembic_config(url), LAST_PG16_REVISION)
        with psycopg.connect(url, autocommit=True) as connection:
            register_vector(connection)
            version = connection.execute("SHOW server_version").fetchone()
            assert version is not None and str(version[0]).startswith("16.")
            _store_session(connection, vector)
    finally:
        _as_server_user([*pg_ctl, "stop"])
    return [float(x) for x in vector]


def _store_session(connection: psycopg.Connection[tuple[object, ...]], vector: object) -> None:
    # the migrations made tenant `local`
    connection.execute(
        "INSERT INTO sessions (id, tenant_id, version, turn_count, next_seq, c0_tokens, policy, "
        "calibration_ratio) VALUES (%s, 'local', 0, 3, 4, 0, '{}', 1)",
        (SESSION,),
    )
    connection.execute(
        "INSERT INTO chunks (session_id, id, kind, turn_start, turn_end, seq_start, seq_end, "
        "roles, first_ts, last_ts, raw_text, tokens, summary_hint, embedding, embedding_model, "
        "needs_embedding, lexical, content_hash) VALUES (%s, 'ck_1', 'offload', 1, 1, 1, 1, "
        "'{user}', now(), now(), %s, 20, '', %s, 'm', false, array_to_tsvector(%s), 'h')",
        (SESSION, TEXT, vector, list(dict.fromkeys(lexical_terms(TEXT)))),
    )
    connection.execute(
        "INSERT INTO chunk_units (session_id, chunk_id, ord, seq, said_at, text_start, "
        "text_end, embedding, embedding_model) VALUES (%s, 'ck_1', 0, 1, now(), 0, %s, %s, 'm')",
        (SESSION, len(TEXT), vector),
    )


def test_a_postgres_16_folder_is_refused_then_upgraded_keeping_every_row(
    legacy_bindir: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vector = _write_pg16_folder(legacy_bindir, data_dir)
    with pytest.raises(EmbeddedDataOutdated, match="ebbtide engine upgrade"):
        start_embedded(data_dir)

    monkeypatch.setenv("EBBTIDE_DATA_DIR", str(data_dir))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    get_settings.cache_clear()
    try:
        main(["engine", "upgrade", "--old-bindir", str(legacy_bindir)])
    finally:
        get_settings.cache_clear()
    assert (data_dir / "pg.16" / "PG_VERSION").read_text().strip() == "16"  # kept as it was
    assert (data_dir / "pg" / "PG_VERSION").read_text().strip() == str(bundled_major())

    url = start_embedded(data_dir)
    upgrade_head(url)
    with psycopg.connect(url) as connection:
        extension = connection.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
        stored = connection.execute(
            "SELECT raw_text FROM chunks WHERE session_id = %s", (SESSION,)
        ).fetchall()
    assert extension is not None and extension[0] >= "0.8"
    assert [row[0] for row in stored] == [TEXT]

    found, units = asyncio.run(_search(url, vector))
    assert found == ["ck_1"]  # by its words
    assert units == ["ck_1"]  # through the HNSW index (no session is small enough to scan)


async def _search(url: str, vector: list[float]) -> tuple[list[str], list[str]]:
    database = Database.connect(url, pool_size=1)
    try:
        assert (await database.store_engine()).postgres.startswith(f"{bundled_major()}.")
        async with database.transaction() as db:
            found = await lexical_candidates(
                db, SESSION, ["hartwell"], 5, LexicalScan(100, 1.2, 0.75)
            )
            units = await unit_candidates(
                db, SESSION, "m", vector, vector, 1, VectorScan(100, 0, 1000)
            )
    finally:
        await database.dispose()
    return [c.id for c in found], [u.chunk_id for u in units]
