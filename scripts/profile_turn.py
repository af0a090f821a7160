"""Profiles turns with pyinstrument, in process, against the embedded Postgres: where the
time of a turn goes beyond the database round trips. For docs/BENCHMARKS.md.

    python scripts/profile_turn.py --kind never --turns 300 --out docs/profiles/never.txt
    python scripts/profile_turn.py --kind floor --turns 300 --out docs/profiles/floor.txt

`never`: sessions that never cross the watermark (10 turns each, 128k window), as in
`ebbtide bench`; `history`: one session of short turns in a 1,024-token window (it offloads
and recalls every turn), profiled over its last `--turns` turns after `--skip` turns;
`steady`: the bench's steady session (110-word turns, 4,000-token window, recall forced).
The hash embedder: what is left is Ebbtide's own work.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from pathlib import Path

import httpx
from pyinstrument import Profiler

from app.bench.run import turn_body
from app.main import create_app
from app.settings import Settings
from app.store.embedded import drop_database, fresh_database, start_embedded
from app.store.migrate import upgrade_head


async def drive(url: str, kind: str, turns: int, skip: int) -> str:
    """The profile of `turns` requests, as text."""
    settings = Settings(
        database_url=url,
        floor_endpoint=True,
        embedder={"kind": "hash"},  # type: ignore[arg-type]
    )
    app = create_app(settings=settings, database_url=url)
    rng = random.Random(7)
    profiler = Profiler(async_mode="enabled")
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:

            async def post(i: int) -> None:
                if kind == "history":
                    body = turn_body(rng, i, 1024, 40, "auto")
                    path = "/sessions/history/turn"
                elif kind == "steady":
                    body = turn_body(rng, i, 4000, 110, "force")
                    path = "/sessions/steady/turn"
                else:
                    body = turn_body(rng, i % 10, 128_000, 80, "auto")
                    path = (
                        f"/bench/floor/f-{i // 10}"
                        if kind == "floor"
                        else f"/sessions/n-{i // 10}/turn"
                    )
                (await client.post(path, json=body)).raise_for_status()

            for i in range(skip):
                await post(i)
            profiler.start()
            for i in range(skip, skip + turns):
                await post(i)
            profiler.stop()
    return str(profiler.output_text(unicode=True, color=False, show_all=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kind", choices=["never", "floor", "history", "steady"], default="never")
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--skip", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("out/profile.txt"))
    parser.add_argument("--data-dir", type=Path, default=Path(".ebbtide"))
    args = parser.parse_args()
    admin = start_embedded(args.data_dir, database="postgres")
    url = fresh_database(admin, "ebbtide_profile")
    try:
        upgrade_head(url)
        text = asyncio.run(drive(url, args.kind, args.turns, args.skip))
    finally:
        drop_database(admin, "ebbtide_profile")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"profile written to {args.out}")


if __name__ == "__main__":
    main()
