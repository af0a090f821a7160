"""How offloads land and what the provider's prompt cache can reuse, for docs/BENCHMARKS.md:
one conversation per window × turn size × recall mode, posted through the turn endpoint on
the embedded Postgres.

    python scripts/measure_offload.py --out docs/bench/offload.json

Each turn posts the previous assistant reply and a new user message, about half the turn's
tokens each, in one-token English words drawn with Zipf weights (`ebbtide bench`'s text);
every fifth user message is a question about something said earlier, so
recall (`auto`) searches and sometimes injects (the default local embedder, chunks embedded
inline so that each turn sees the vectors of the offload before it; `--embedder hash` for a
quick run, with the margins its hashed vectors need, as the tests use them); with recall
`off` the same conversation shows the offloads alone (R is then 0). Per run it reports
the offloads, the turns between them, the tokens each one freed and where it landed (the
watermark after it, against the target), the turns at each level, the largest prompt over
C − r and the largest recalled block over its share R, and the cache share: the tokens each
prompt shares as a prefix with the previous one (whole messages), over all prompt tokens,
offload turns included (app/evaluation/prefix.py), for the whole run and from the first
offload on (the cycle the session then repeats; the filling turns before it are all cache
hits). A run lasts until `MIN_OFFLOADS` offloads after the first, or `--max-turns`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import random
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from app.bench.run import VOCABULARY, sentence
from app.evaluation.prefix import CacheShare
from app.main import create_app
from app.providers.embedders import HashEmbedder, LocalEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.settings import Settings
from app.store.database import Database
from app.store.embedded import fresh_database, start_embedded
from app.store.migrate import upgrade_head

SYSTEM = "You are a release engineer's assistant. Answer briefly and cite the ticket."
WINDOWS = (4_000, 8_000, 32_000, 128_000)
TURN_TOKENS = (60, 200, 1_000)
QUESTION_EVERY = 5
MIN_OFFLOADS = 8
RANK = {word: rank for rank, word in enumerate(VOCABULARY)}  # Zipf rank: higher is rarer
HASH_MARGINS = {"auto_min_margin": 0.5, "asked_min_margin": 0.35}  # tests/builders.py


@dataclass(frozen=True)
class RunResult:
    window: int
    turn_tokens: int
    recall: str
    turns: int
    offloads: int
    turns_between_offloads: float | None  # median gap between consecutive offloads
    tokens_freed_per_offload: float | None  # median
    watermark_after_offload_max: float | None  # the highest landing, against target_ratio
    levels: dict[str, int]
    prompt_over_ceiling_max: float  # prompt_tokens / (C − r), the largest of the run
    recall_over_share_max: float | None  # a turn's recalled block / R, the largest
    recall_turns: int  # turns that injected a block
    cache_share: float  # of the whole run, offload turns included
    cache_share_from_first_offload: float | None
    cache_share_between_offloads: float | None
    seconds: float


def turn_messages(
    rng: random.Random, turn: int, turn_tokens: int, said: list[str]
) -> list[dict[str, str]]:
    """The previous reply and the user's message, about half the turn's tokens each; `said`
    gathers the user's messages. Each fifth message only asks about a word of one said 10 to
    60 turns before (the rarest of its words, so that it names that turn), and the reply
    before it takes the whole turn's tokens."""
    half = turn_tokens // 2
    asks = turn % QUESTION_EVERY == QUESTION_EVERY - 1 and len(said) > 10
    reply = turn_tokens - 12 if asks else half - 2
    messages = [{"role": "assistant", "content": sentence(rng, reply)}] if turn else []
    if asks:
        earlier = [w for w in said[-rng.randint(10, min(60, len(said)))].split() if w in RANK]
        rarest = max(earlier, key=RANK.__getitem__)
        text = f"What did we decide about the {rarest} earlier?"
    else:
        text = f"Step {turn}: " + sentence(rng, half - 4)
    said.append(text)
    messages.append({"role": "user", "content": text})
    return messages


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


async def converse(
    http: httpx.AsyncClient,
    window: int,
    turn_tokens: int,
    recall_mode: str,
    max_turns: int,
    policy: dict[str, float],
) -> RunResult:
    rng = random.Random(f"{window}-{turn_tokens}")  # the same turns in both recall modes
    said: list[str] = []
    counter = default_counter()
    share = CacheShare(count=counter.count)
    offload_turns: list[int] = []
    freed: list[float] = []
    landings: list[float] = []
    levels: Counter[str] = Counter()
    over_ceiling = 0.0
    over_share: float | None = None
    recall_turns = 0
    began = time.perf_counter()
    session = f"offload-{window}-{turn_tokens}-{recall_mode}"
    turn = 0
    while turn < max_turns and len(offload_turns) <= MIN_OFFLOADS:
        body = {
            "messages": turn_messages(rng, turn, turn_tokens, said),
            "context_window": window,
            "recall": recall_mode,
        }
        if turn == 0:
            body["system"] = SYSTEM
            body["policy"] = policy
        answer = await http.post(f"/sessions/{session}/turn", json=body)
        answer.raise_for_status()
        result = answer.json()
        usage, offload, recall = result["usage"], result["offload"], result["recall"]
        share.record(result["messages"], offloaded=offload["triggered"])
        levels[usage["level"]] += 1
        ceiling = usage["context_window"] - usage["reserve_tokens"]
        over_ceiling = max(over_ceiling, usage["prompt_tokens"] / ceiling)
        share_tokens = usage.get("recall_share_tokens", usage.get("recall_reserve_tokens"))
        if share_tokens:  # (the second name: the release before, for the figures before)
            block = recall["injected_tokens"] * usage["calibration_ratio"]
            over_share = max(over_share or 0.0, block / share_tokens)
        recall_turns += recall["injected_tokens"] > 0
        if offload["triggered"]:
            offload_turns.append(turn)
            freed.append(offload["tokens_freed"])
            landings.append(usage["watermark"])
        turn += 1
    gaps = [float(b - a) for a, b in itertools.pairwise(offload_turns)]
    return RunResult(
        window=window,
        turn_tokens=turn_tokens,
        recall=recall_mode,
        turns=turn,
        offloads=len(offload_turns),
        turns_between_offloads=_median(gaps),
        tokens_freed_per_offload=_median(freed),
        watermark_after_offload_max=max(landings, default=None),
        levels=dict(levels),
        prompt_over_ceiling_max=round(over_ceiling, 4),
        recall_over_share_max=None if over_share is None else round(over_share, 4),
        recall_turns=recall_turns,
        cache_share=share.whole_run(),
        cache_share_from_first_offload=share.whole_run(offload_turns[0]) if offload_turns else None,
        cache_share_between_offloads=share.between_offloads(),
        seconds=round(time.perf_counter() - began, 1),
    )


async def measure(
    grid: list[tuple[int, int, str]], cap: int, policy: dict[str, float], embedder_kind: str
) -> list[RunResult]:
    data_dir = Path(tempfile.mkdtemp(prefix="ebbtide-offload-"))
    server = start_embedded(data_dir, database="postgres")
    url = fresh_database(server, "ebbtide_offload")
    await asyncio.to_thread(upgrade_head, url)
    database = Database.connect(url, pool_size=2)
    hashed = embedder_kind == "hash"
    settings = Settings(
        database_url=url,
        embedder={"kind": embedder_kind, "offload_embedding": "inline"},
        recall=HASH_MARGINS if hashed else {},
    )
    embedder = HashEmbedder() if hashed else LocalEmbedder()
    ctx = ServiceContext(
        database=database, counter=default_counter(), embedder=embedder, settings=settings
    )
    results = []
    try:
        transport = httpx.ASGITransport(app=create_app(context=ctx))
        async with httpx.AsyncClient(transport=transport, base_url="http://ebbtide.local") as http:
            for window, turn_tokens, recall_mode in grid:
                run = await converse(http, window, turn_tokens, recall_mode, cap, policy)
                print(json.dumps(asdict(run)), flush=True)
                results.append(run)
    finally:
        await database.dispose()
    return results


def _cell(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def markdown(runs: list[RunResult]) -> str:
    """The table docs/BENCHMARKS.md quotes, one row per run."""
    lines = [
        "| window | turn tokens | recall | turns | offloads | turns between | tokens freed | "
        "highest landing | prompt / (C − r) max | block / R max | cache share: run | "
        "from 1st offload | between offloads |",
        "| ---: | ---: | --- |" + " ---: |" * 10,
    ]
    for run in runs:
        lines.append(
            f"| {run.window:,} | {run.turn_tokens:,} | {run.recall} | {run.turns} | "
            f"{run.offloads} | {_cell(run.turns_between_offloads, 0)} | "
            f"{_cell(run.tokens_freed_per_offload, 0)} | "
            f"{_cell(run.watermark_after_offload_max)} | {_cell(run.prompt_over_ceiling_max)} | "
            f"{_cell(run.recall_over_share_max)} | **{_cell(run.cache_share)}** | "
            f"{_cell(run.cache_share_from_first_offload)} | "
            f"{_cell(run.cache_share_between_offloads)} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    logging.disable(logging.INFO)  # a line per request and Postgres's own chatter
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, nargs="+", default=list(WINDOWS))
    parser.add_argument("--turn-tokens", type=int, nargs="+", default=list(TURN_TOKENS))
    parser.add_argument("--max-turns", type=int, default=4_000, help="per run, at most")
    parser.add_argument("--recall", nargs="+", default=["auto", "off"], choices=["auto", "off"])
    parser.add_argument("--embedder", choices=["local", "hash"], default="local")
    parser.add_argument(
        "--target-ratio", type=float, help="a policy override: where a batch lands (default 0.65)"
    )
    parser.add_argument("--out", type=Path, default=Path("out/offload.json"))
    args = parser.parse_args()
    grid = [(w, t, r) for w in args.windows for t in args.turn_tokens for r in args.recall]
    policy = {} if args.target_ratio is None else {"target_ratio": args.target_ratio}
    runs = asyncio.run(measure(grid, args.max_turns, policy, args.embedder))
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "command": "python scripts/measure_offload.py",
        "policy": policy,
        "embedder": args.embedder,
        "runs": [asdict(run) for run in runs],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(markdown(runs))


if __name__ == "__main__":
    main()
