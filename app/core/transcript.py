"""Reconciling a client's whole history with the session's stored transcript (proxy mode).

An unmodified SDK sends every earlier message on every call, including the ones this service
has offloaded. Each stored message keeps a digest of what it says; the client's history is
matched against the live transcript by those digests and only its new suffix is stored.

The rules, in order:

1. The client's first message is looked up in the transcript (a client may drop its own
   oldest messages; the stored ones before stay). From there the two are compared message by
   message.
2. The client repeats the transcript to its end: the rest of the client's history is new.
3. The client differs at some stored message (an edited or regenerated message, or a reply
   it never received): the client's version wins from there on. The stored messages from that
   point are archived as a superseded branch, readable by id but out of the window, recall
   and notes; the client's messages from the same point are stored as new. The point moves
   back to the start of its turn, and to the start of an offloaded chunk it falls inside, so
   that no turn or chunk is half live (the client's copies of the messages it moves over are
   stored again, so nothing live is lost).
4. The client's first message is nowhere in the transcript (its first message edited, or a
   new conversation under an old id): the client's version wins from the start, so the whole
   live transcript is archived and all of the client's history stored. The proxy takes whole
   histories; a client that sends only its new messages posts them to `/turn` instead.

A divergence caused by a difference the digest should not see heals in one call: the client's
copy is stored, and matches from then on.

The digest covers what a message says: its role, text, tool calls (arguments as canonical
JSON), tool results, media and refusals. It leaves out reasoning (OpenAI-compatible clients
drop `reasoning_content` when they send a reply back), names and provider extras, so a reply
this service recorded from the upstream is recognised when the client echoes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from app.core.messages import Media, Message, Opaque, Reasoning, Refusal, Text, ToolCall, ToolResult
from app.core.pace import pace


def _canonical_arguments(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, ensure_ascii=False)
    except ValueError:
        return arguments.strip()


def _media_key(media: Media) -> list[str]:
    source = media.data or media.url or media.file_id or ""
    return [media.kind, hashlib.sha256(source.encode()).hexdigest()]


def _result_key(result: ToolResult) -> list[object]:
    texts = "".join(part.text for part in result.content if isinstance(part, Text))
    media = [_media_key(part) for part in result.content if isinstance(part, Media)]
    return ["result", result.call_id, texts.strip(), media, result.is_error]


def _features(message: Message) -> list[object]:
    """What the digest covers, in order; consecutive texts are joined, as formats split and
    join text blocks differently."""
    features: list[object] = [message.role]
    texts: list[str] = []
    for part in message.parts:
        if isinstance(part, Text):
            texts.append(part.text)
            continue
        if isinstance(part, Reasoning):
            continue
        if texts:
            features.append(["text", "".join(texts).strip()])
            texts = []
        if isinstance(part, ToolCall):
            features.append(["call", part.id, part.name, _canonical_arguments(part.arguments)])
        elif isinstance(part, ToolResult):
            features.append(_result_key(part))
        elif isinstance(part, Media):
            features.append(_media_key(part))
        elif isinstance(part, Refusal):
            features.append(["refusal", part.text.strip()])
        elif isinstance(part, Opaque):
            features.append(["opaque", json.dumps(part.data, sort_keys=True)])
    if texts and "".join(texts).strip():
        features.append(["text", "".join(texts).strip()])
    return features


def message_digest(message: Message) -> str:
    """SHA-256 of what the message says (see the module docstring for what is left out)."""
    pace()
    text = json.dumps(_features(message), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class StoredEntry:
    """One live message of the transcript, as reconciliation needs it. `chunk_start` is the
    first seq of the offloaded chunk holding it (None while it is in the window)."""

    seq: int
    turn: int
    digest: str | None  # None: stored before digests existed and already offloaded
    chunk_start: int | None = None


@dataclass(frozen=True)
class Reconciliation:
    """What a client's history adds: `new` messages to store, and `branch_from`, the first
    stored seq archived as superseded (None: nothing is). `matched` counts the client's
    messages recognised as stored."""

    new: tuple[Message, ...]
    branch_from: int | None = None
    matched: int = 0

    @property
    def archived(self) -> bool:
        return self.branch_from is not None


def _run_length(stored: Sequence[StoredEntry], start: int, client: Sequence[str]) -> int:
    length = 0
    while (
        start + length < len(stored)
        and length < len(client)
        and stored[start + length].digest == client[length]
    ):
        length += 1
    return length


def _best_anchor(stored: Sequence[StoredEntry], client: Sequence[str]) -> tuple[int, int] | None:
    """(stored index, run length) where the client's history lines up: the one that reaches
    the transcript's end if any, else the longest run; the earliest on ties."""
    best: tuple[int, int] | None = None
    for start, entry in enumerate(stored):
        if entry.digest != client[0]:
            continue
        length = _run_length(stored, start, client)
        if start + length == len(stored):
            return start, length
        if best is None or length > best[1]:
            best = (start, length)
    return best


def _branch_point(stored: Sequence[StoredEntry], diverged: int, anchor: int) -> int:
    """The divergence moved back to the start of its turn and of any offloaded chunk it
    falls inside, but never before the client's first message (`anchor`)."""
    point = diverged
    while True:
        entry = stored[point]
        start_seq = entry.seq if entry.chunk_start is None else min(entry.seq, entry.chunk_start)
        moved = point
        while moved > anchor and (
            stored[moved - 1].turn == entry.turn or stored[moved - 1].seq >= start_seq
        ):
            moved -= 1
        if moved == point:
            return point
        point = moved


def reconcile(stored: Sequence[StoredEntry], client: Sequence[Message]) -> Reconciliation:
    """Applies the module's rules to the client's history (its leading system prompt
    already taken off)."""
    if not client:
        return Reconciliation(new=())
    digests = [message_digest(message) for message in client]
    anchor = _best_anchor(stored, digests)
    if anchor is None:
        return Reconciliation(new=tuple(client), branch_from=stored[0].seq if stored else None)
    start, length = anchor
    if start + length == len(stored):
        return Reconciliation(new=tuple(client[length:]), matched=length)
    point = _branch_point(stored, start + length, start)
    kept = point - start
    return Reconciliation(new=tuple(client[kept:]), branch_from=stored[point].seq, matched=kept)
