"""What one session costs the database, for docs/SCALING.md: a conversation replayed through
the turn endpoint on the embedded Postgres, then every table's size (heap, TOAST and
indexes) per turn, per chunk and per session, and the CPU time Postgres and the app spent
per turn.

    python scripts/measure_session_cost.py --turns 1000 --out docs/bench/session_cost.json

Postgres's CPU is its server processes' user and system time (the postmaster's own, the
time of the backends it has reaped, and the live ones'), read from /proc before and after;
the app's is this process's (the in-process app and the client, hash embedder).

Each turn posts the user's message (about 120 words; every fifth ends with a question about
something said earlier, which recall answers) and the previous reply (about 60); the window is
8,000 tokens, so the session offloads as a long one does. Offloads embed inline
with the hash embedder, whose vectors have the local model's 384 dimensions, so vector and
index sizes are those of a real deployment. Text is not encrypted (Fernet adds about a
third to each sealed value).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from app.main import create_app
from app.providers.embedders import HashEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.settings import Settings
from app.store.database import Database
from app.store.embedded import fresh_database, start_embedded
from app.store.migrate import upgrade_head
from app.store.models import Base

VOCABULARY = (
    "deploy build queue shard region invoice customer ticket review branch merge schema table "
    "index latency budget window token session archive recall vector lexical worker release "
    "rollback migration alert dashboard metric tenant key rotate backup restore cache replica"
).split()
WINDOW = 8_000
QUESTION_EVERY = 5


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(words)) + "."


async def converse(http: httpx.AsyncClient, turns: int, seed: int, recall: str) -> None:
    rng = random.Random(seed)
    reply = ""
    for turn in range(turns):
        messages = [{"role": "assistant", "content": reply}] if reply else []
        text = f"Step {turn}: " + sentence(rng, 120)
        if turn % QUESTION_EVERY == QUESTION_EVERY - 1:  # a question about the past: recall
            text += f" What did we decide about the {rng.choice(VOCABULARY)} earlier?"
        messages.append({"role": "user", "content": text})
        body = {"messages": messages, "context_window": WINDOW, "recall": recall}
        answer = await http.post("/sessions/storage/turn", json=body)
        answer.raise_for_status()
        reply = sentence(rng, 60)


def postgres_cpu_s(data_dir: Path) -> float:
    """User + system seconds of the embedded Postgres's processes so far (Linux /proc)."""
    postmaster = int((data_dir / "pg" / "postmaster.pid").read_text().split()[0])
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # the process ended meanwhile
            continue
        pid, parent = int(stat.parent.name), int(fields[1])
        if pid == postmaster:  # its own time and that of the children it reaped
            total += sum(int(f) for f in fields[11:15])
        elif parent == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / ticks


async def sizes(database: Database) -> dict[str, Any]:
    async with database.transaction() as db:
        tables = {}
        for name in sorted(Base.metadata.tables):
            size = await db.scalar(
                text("SELECT pg_total_relation_size(CAST(:t AS regclass))"), {"t": name}
            )
            rows = await db.scalar(text(f"SELECT count(*) FROM {name}"))
            tables[name] = {"bytes": int(size or 0), "rows": int(rows or 0)}
    return tables


async def measure(turns: int, seed: int, recall: str) -> dict[str, Any]:
    data_dir = Path(tempfile.mkdtemp(prefix="ebbtide-session-cost-"))
    server = start_embedded(data_dir, database="postgres")
    url = fresh_database(server, "ebbtide_storage")
    await asyncio.to_thread(upgrade_head, url)
    database = Database.connect(url, pool_size=2)
    settings = Settings(database_url=url, embedder={"kind": "hash", "offload_embedding": "inline"})
    ctx = ServiceContext(
        database=database, counter=default_counter(), embedder=HashEmbedder(), settings=settings
    )
    began = time.perf_counter()
    try:
        transport = httpx.ASGITransport(app=create_app(context=ctx))
        async with httpx.AsyncClient(transport=transport, base_url="http://ebbtide.local") as http:
            database_cpu, app_cpu = postgres_cpu_s(data_dir), time.process_time()
            await converse(http, turns, seed, recall)
            database_cpu = postgres_cpu_s(data_dir) - database_cpu
            app_cpu = time.process_time() - app_cpu
        tables = await sizes(database)
    finally:
        await database.dispose()
    total = sum(t["bytes"] for t in tables.values())
    chunks = tables["chunks"]["rows"]
    return {
        "turns": turns,
        "recall": recall,
        "seconds": round(time.perf_counter() - began),
        "postgres_cpu_ms_per_turn": round(database_cpu * 1000 / turns, 2),
        "app_cpu_ms_per_turn": round(app_cpu * 1000 / turns, 2),
        "tables": tables,
        "total_bytes": total,
        "bytes_per_turn": round(total / turns),
        "chunks": chunks,
        "bytes_per_chunk_with_units": round(
            (tables["chunks"]["bytes"] + tables["chunk_units"]["bytes"]) / max(chunks, 1)
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument(
        "--recall", choices=["auto", "off"], default="auto", help="off: the bookkeeping alone"
    )
    parser.add_argument("--out", type=Path, default=Path("out/session_cost.json"))
    args = parser.parse_args()
    result = asyncio.run(measure(args.turns, args.seed, args.recall))
    result["date"] = time.strftime("%Y-%m-%d")
    result["command"] = (
        f"python scripts/measure_session_cost.py --turns {args.turns} --recall {args.recall}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "tables"}, indent=2))
    for name, table in result["tables"].items():
        print(f"{name:16} {table['rows']:>8} rows {table['bytes'] / 1e6:>9.2f} MB")


if __name__ == "__main__":
    main()
