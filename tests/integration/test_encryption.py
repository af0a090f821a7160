"""Encryption at rest (docs/DESIGN.md §11): no table holds the conversation's words in the clear,
every read path opens them, and key rotation re-seals every row."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.errors import EncryptionKeyMissing, EncryptionKeyRejected, InvalidEncryptionKey
from app.core.formats import SystemPrompt
from app.services.context import ServiceContext
from app.services.maintenance import reseal_all
from app.services.recall import recall_query
from app.services.sessions import session_status
from app.services.turns import run_turn
from app.store.models import Base
from app.store.sealing import SEALED_PREFIX, Sealer, new_key, use_sealer
from tests.builders import user, words
from tests.integration.test_turn_invariants import turn_input

SECRET = "Quokkafjord"  # one word, so the lexical index would hold it in the clear
SECRET_LINE = f"The vault code word is {SECRET}, and it must never be written down."
WINDOW = 4000
KEY_A, KEY_B = new_key(), new_key()


@pytest.fixture
def keys() -> Iterator[None]:
    use_sealer(Sealer([KEY_A]))
    yield
    use_sealer(None)


async def converse(ctx: ServiceContext, session_id: str) -> None:
    """The secret early, then enough small talk to offload it, with idempotency keys."""
    await run_turn(
        ctx,
        turn_input(
            session_id, [user(SECRET_LINE)], context_window=WINDOW, system=SystemPrompt("Be brief.")
        ),
    )
    for t in range(40):
        await run_turn(
            ctx,
            turn_input(
                session_id,
                [user(f"turn {t} " + words(60, "chat"))],
                context_window=WINDOW,
                idempotency_key=f"k{t}",
            ),
        )


async def tables_holding(connection: AsyncConnection, needle: str) -> list[str]:
    """Tables with any row whose text form (every column, the tsvector too) holds `needle`."""
    found = []
    for table in Base.metadata.sorted_tables:
        hits = await connection.scalar(
            text(f"SELECT count(*) FROM {table.name} t WHERE lower(t::text) LIKE :needle"),
            {"needle": f"%{needle.lower()}%"},
        )
        if hits:
            found.append(table.name)
    return found


async def test_no_table_holds_the_text_in_the_clear_and_every_read_opens_it(
    ctx: ServiceContext, connection: AsyncConnection, keys: None
) -> None:
    await converse(ctx, "sealed")
    assert await tables_holding(connection, "vault code") == []
    assert await tables_holding(connection, SECRET) == []
    assert await tables_holding(connection, "Be brief") == []
    sealed_chunks = await connection.scalar(
        text("SELECT count(*) FROM chunks WHERE session_id = 'local/sealed' AND raw_text LIKE :p"),
        {"p": SEALED_PREFIX + "%"},
    )
    assert sealed_chunks and sealed_chunks > 0

    found = await recall_query(ctx, "local", "sealed", SECRET, None)
    assert SECRET_LINE in found.results[0].text  # the lexical index matched a blind term
    status = await session_status(ctx, "local", "sealed")
    assert status.counts.chunks == sealed_chunks
    assert status.last_offload is not None


async def test_rotation_moves_every_row_to_the_new_key(
    ctx: ServiceContext, connection: AsyncConnection, keys: None
) -> None:
    await converse(ctx, "rotated")
    use_sealer(Sealer([KEY_B, KEY_A]))
    report = await reseal_all(ctx, batch=7)  # a small batch walks the key order across batches
    assert report.rows_by_table["messages"] > 40 and report.chunks_reindexed > 0

    use_sealer(Sealer([KEY_B]))  # the old key is gone: everything must open with the new one
    found = await recall_query(ctx, "local", "rotated", SECRET, None)
    assert SECRET_LINE in found.results[0].text
    assert await tables_holding(connection, SECRET) == []

    use_sealer(Sealer([KEY_A]))
    with pytest.raises(EncryptionKeyRejected):
        await recall_query(ctx, "local", "rotated", SECRET, None)
    use_sealer(None)
    with pytest.raises(EncryptionKeyMissing):
        await session_status(ctx, "local", "rotated")


async def test_switching_encryption_on_seals_rows_written_in_the_clear(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    await converse(ctx, "plain")
    assert "chunks" in await tables_holding(connection, SECRET)
    try:
        use_sealer(Sealer([KEY_A]))
        await reseal_all(ctx)
        assert await tables_holding(connection, SECRET) == []
        found = await recall_query(ctx, "local", "plain", SECRET, None)
        assert SECRET_LINE in found.results[0].text
    finally:
        use_sealer(None)


async def test_a_missing_key_is_a_clear_server_error(
    ctx: ServiceContext, client: httpx.AsyncClient, keys: None
) -> None:
    await converse(ctx, "keyless")
    use_sealer(None)
    response = await client.get("/sessions/keyless/status")
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "encryption_key_missing"


def test_a_key_that_is_not_a_fernet_key_is_refused() -> None:
    with pytest.raises(InvalidEncryptionKey, match="not a Fernet key"):
        Sealer(["hunter2"])
    with pytest.raises(InvalidEncryptionKey):
        Sealer([])
