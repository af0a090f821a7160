"""The long-chats set's quick form (two chats, window 2,000) through the real pipeline with the
local embedder, as `ebbtide eval` runs it: `POST /recall` and the flat hybrid baseline on the
same questions, the report's table printed, floors checked so that a change that loses recall
on this set fails here."""

from __future__ import annotations

from app.evaluation.chats_recall import ChatsConfig
from app.evaluation.report import chats_table
from app.evaluation.run import evaluate_chats
from app.providers.embedders import LocalEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.settings import Settings
from app.store.database import Database

# Measured on the build machine (docs/RECALL.md, quick form, 2026-12-04): R@5 (any evidence)
# en 0.71, zh 0.74, the flat baseline beside them 0.76 / 0.76; 208 of 235 questions archived.
# Floors a little under the service's, so that a change that loses recall here fails; that
# the service is below the baseline on this set is issue 32's to mend.
FLOORS = {"en": 0.65, "zh": 0.68}
MIN_ARCHIVED_SHARE = 0.8


async def test_the_long_chats_keep_their_floors(database: Database) -> None:
    ctx = ServiceContext(
        database=database,
        counter=default_counter(),
        embedder=LocalEmbedder(),
        settings=Settings(database_url="postgresql://bound-in-tests"),
    )
    report = await evaluate_chats(ctx, ChatsConfig.quick())
    lines = chats_table({"chats": report})
    print("\n" + "\n".join(lines))
    table = {row["group"]: row for row in report["rows"]}
    assert table["all"]["archived"] >= MIN_ARCHIVED_SHARE * table["all"]["questions"]
    for language, floor in FLOORS.items():
        row = table[language]
        assert row["any_at_5"] is not None and row["any_at_5"] >= floor, row
        assert row["flat_any_at_5"] is not None, row  # the baseline is measured beside it
        assert any(line.startswith(f"| {language} | ") for line in lines)
