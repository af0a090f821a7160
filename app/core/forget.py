"""What else must go when chunks are forgotten (docs/DESIGN.md §11): whatever was derived from their
text. Facts and notes items are sentences copied verbatim from messages, so "derived from" is
"found inside a forgotten text" (or, for a fact, taken from one of the forgotten messages)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.notes import NotesBody

QUERY_FIELDS = ("query_raw", "query_rewritten")
NOTES_TEXT_FIELDS = ("rejected_constraints", "missing_constraints")


@dataclass(frozen=True)
class Forgotten:
    """The forgotten chunks' texts, message seqs and turns."""

    texts: Sequence[str]
    seqs: Collection[int]
    turns: Collection[int]

    def holds(self, text: str | None) -> bool:
        if not text:
            return False
        return any(text in forgotten for forgotten in self.texts)


def stub_replacement(chunk_id: str) -> str:
    """What a window stub of a forgotten oversize message says instead."""
    return f"[content removed by a forget request; it was stored as {chunk_id}]"


def derived_fact(forgotten: Forgotten, text: str, source_seq: int | None) -> bool:
    return (source_seq is not None and source_seq in forgotten.seqs) or forgotten.holds(text)


def body_without(body: NotesBody, forgotten: Forgotten) -> NotesBody:
    return NotesBody(
        goal=None if forgotten.holds(body.goal) else body.goal,
        done=[item for item in body.done if not forgotten.holds(item.get("text"))],
        open=[item for item in body.open if not forgotten.holds(item.get("text"))],
    )


def scrubbed_payload(
    payload: dict[str, Any], turn: int | None, forgotten: Forgotten
) -> dict[str, Any] | None:
    """The event payload without forgotten text, or None when nothing in it changes. A turn
    inside a forgotten range loses its query text (the query was that turn's message)."""
    changed = False
    recall = dict(payload.get("recall") or {})
    for name in QUERY_FIELDS:
        value = recall.get(name)
        if value is not None and (turn in forgotten.turns or forgotten.holds(value)):
            recall[name] = None
            changed = True
    notes = dict(payload.get("notes") or {})
    for name in NOTES_TEXT_FIELDS:
        kept = [text for text in notes.get(name) or [] if not forgotten.holds(text)]
        if kept != (notes.get(name) or []):
            notes[name] = kept
            changed = True
    if not changed:
        return None
    return {**payload, "recall": recall, "notes": notes}
