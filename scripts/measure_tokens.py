"""How far cl100k (the old count for every model) is from each family's own tokenizer, on
Chinese prose, English prose, code and tool-call JSON: the table of docs/TOKENS.md.

    .venv/bin/python scripts/measure_tokens.py > docs/tokens/table.md
"""

from __future__ import annotations

import json
from pathlib import Path

from app.evaluation.hard_set import filler_pools, hard_needles
from app.providers.tokenizer import ENCODINGS, counter_for_encoding

ROOT = Path(__file__).resolve().parents[1]
CODE_CHARS = 200_000


def _is_chinese(text: str) -> bool:
    return any("\u4e00" <= c <= "\u9fff" for c in text)


def corpora() -> dict[str, str]:
    needles = hard_needles()
    pools = filler_pools()
    said = {lang: [*pool.user, *pool.assistant] for lang, pool in pools.items()}
    facts = [t for n in needles for t in (*n.fact, n.question, n.distractor)]
    zh = [*said["zh"], *(t for t in facts if _is_chinese(t))]
    en = [*said["en"], *(t for t in facts if not _is_chinese(t))]
    code = "\n".join(p.read_text() for p in sorted((ROOT / "app").rglob("*.py")))[:CODE_CHARS]
    calls = [
        {
            "id": f"call_{i:04d}",
            "type": "function",
            "function": {
                "name": "search_notes",
                "arguments": json.dumps(
                    {"query": n.question, "limit": 5, "filters": {"speaker": n.speaker}},
                    ensure_ascii=False,
                ),
            },
        }
        for i, n in enumerate(needles)
    ]
    return {
        "Chinese prose": "\n".join(zh),
        "English prose": "\n".join(en),
        "code (this repository's Python)": code,
        "tool-call JSON (zh and en arguments)": json.dumps(calls, ensure_ascii=False),
    }


def main() -> None:
    texts = corpora()
    cl100k = counter_for_encoding("cl100k_base")
    print("Each cell: the family's own count, and how far cl100k's count is from it.\n")
    print("| family (encoding) | " + " | ".join(texts) + " |")
    print("| --- |" + " --- |" * len(texts))
    for name in ENCODINGS:
        counter = counter_for_encoding(name)
        if counter.encoding_name.endswith("~estimate"):
            continue  # no tokenizer of theirs to measure against (docs/TOKENS.md)
        cells = []
        for text in texts.values():
            own, old = counter.count(text), cl100k.count(text)
            cells.append(f"{own:,} ({(old - own) / own:+.0%})")
        print(f"| {counter.encoding_name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
