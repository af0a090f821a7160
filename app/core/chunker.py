"""Turns the messages chosen for offload into chunks (docs/DESIGN.md §3).

Policy and invariants:
- Units stay whole: an assistant message with tool calls and the messages that answer them
  form one unit, never split across C1/C3 or across two chunks.
- Chunks are consecutive units grouped by topic: a chunk closes at a topic change (the cosine
  of two neighbouring units' vectors below a threshold) once it holds `min_tokens`, and always
  before it would pass `max_tokens`; a unit larger than that is a chunk of its own. Without
  vectors (embedder down) only the token bound applies. Optional one-unit overlap.
- Every message's words appear verbatim in its chunk's `raw_text`, under a header line
  `[turn N · role · timestamp]`; tool calls are written as JSON so they are verbatim too,
  tool results and thinking under a label; an image, clip or file is a stub naming its kind,
  size and content hash (its bytes are stored once per session, by hash).
- An oversize message becomes a chunk of its own at once; the window keeps a stub that names
  the chunk, its size and its first and last lines.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from app.core.blobs import archived, blob_hash
from app.core.budget import Unit
from app.core.lexical import distinct_terms, sentences
from app.core.messages import Media, Part, Reasoning, Refusal, Text, ToolCall, ToolResult
from app.core.pace import pace
from app.core.ports import TokenCounter
from app.core.types import ChunkDraft, ChunkKind, UnitDraft, WindowMessage
from app.core.vectors import cosine, mean_vector

SUMMARY_HINT_WORDS = 12
SUMMARY_HINT_CHARS = 80


def group_units(window: Sequence[WindowMessage]) -> list[list[WindowMessage]]:
    """Splits the window (oldest first) into units of messages that move together: a message
    that answers a call of the unit before it joins that unit."""
    units: list[list[WindowMessage]] = []
    open_calls: set[str] = set()
    for item in window:
        answers = item.message.answered_ids
        if units and answers and open_calls.intersection(answers):
            units[-1].append(item)
            open_calls.difference_update(answers)
            open_calls.update(call.id for call in item.message.calls)
            continue
        units.append([item])
        open_calls = {call.id for call in item.message.calls}
    return units


def _awaits_results(messages: Sequence[WindowMessage]) -> bool:
    calls = {call.id for m in messages for call in m.message.calls}
    answered = {call_id for m in messages for call_id in m.message.answered_ids}
    return bool(calls - answered)


def as_budget_unit(
    messages: Sequence[WindowMessage], current_turn: int, token_ratio: float = 1.0
) -> Unit:
    """The unit as the budget sees it; `token_ratio` applies the session's calibration."""
    return Unit(
        seqs=tuple(m.seq for m in messages),
        turn=messages[0].turn,
        tokens=round(sum(m.tokens for m in messages) * token_ratio),
        pinned=any(m.turn == current_turn for m in messages) or _awaits_results(messages),
    )


def _timestamp(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def _header(item: WindowMessage) -> str:
    message = item.message
    label: str = message.role
    if message.role == "tool":
        label = f"tool {' '.join(message.answered_ids)}"
    elif message.name:
        label = f"{message.role} {message.name}"
    return f"[turn {item.turn} · {label} · {_timestamp(item.created_at)}]"


def media_stub(media: Media) -> str:
    """A media part in a chunk's text: what it is and the hash its bytes are kept under (the
    chunk's id heads every recall item and chunk read, so the stub needs not repeat it, and a
    message's units read the same wherever it is stored)."""
    facts = [media.kind, *(v for v in (media.media_type, media.filename) if v)]
    if media.data:
        facts.append(f"{len(media.data) * 3 // 4} bytes, sha256 {blob_hash(media.data)}")
    elif media.url:
        facts.append(media.url)
    elif media.file_id:
        facts.append(f"file {media.file_id}")
    return f"[{', '.join(facts)}]"


def _part_lines(part: Part, tool_message: bool) -> list[str]:
    if isinstance(part, Text | Refusal):
        return [part.text] if part.text else []
    if isinstance(part, Reasoning):
        return [f"thinking: {part.text}"] if part.text else []
    if isinstance(part, ToolCall):
        return [f"tool_call {json.dumps(part.as_openai(), ensure_ascii=False)}"]
    if isinstance(part, ToolResult):
        inner = [line for p in part.content for line in _part_lines(p, False)]
        return inner if tool_message else [f"tool_result {part.call_id}", *inner]
    if isinstance(part, Media):
        return [media_stub(part)]
    return [f"block {part.json_text}"]


def _body(item: WindowMessage) -> str:
    """Every part verbatim in words; media as stubs (their bytes are kept once, by hash)."""
    message = item.message
    tool_message = message.role == "tool" and len(message.parts) == 1
    return "\n".join(line for part in message.parts for line in _part_lines(part, tool_message))


def render_message(item: WindowMessage) -> str:
    """The message as it is kept in a chunk: a header line, then the text verbatim."""
    body = _body(item)
    return f"{_header(item)}\n{body}" if body else _header(item)


@dataclass(frozen=True)
class UnitPolicy:
    """How a chunk is cut into the units that get vectors of their own."""

    max_tokens: int  # a longer message is cut into windows of whole sentences up to this
    max_units: int  # per chunk: an oversize message embeds its first windows only


def _windows(body: str, policy: UnitPolicy, count: Callable[[str], int]) -> list[tuple[int, int]]:
    """(start, end) spans of `body`: all of it when short, else consecutive sentences
    grouped up to `max_tokens` each (a longer sentence is a window of its own)."""
    if count(body) <= policy.max_tokens:
        return [(0, len(body))]
    spans: list[tuple[int, int]] = []
    start = at = size = 0
    for sentence in sentences(body):
        tokens = count(sentence)
        if at > start and size + tokens > policy.max_tokens:
            spans.append((start, at))
            start, size = at, 0
        at += len(sentence)
        size += tokens
    spans.append((start, at))
    return [(a, b) for a, b in spans if body[a:b].strip()]


def _layout(
    messages: Sequence[WindowMessage], policy: UnitPolicy, count: Callable[[str], int]
) -> tuple[str, tuple[UnitDraft, ...]]:
    """The chunk's text (messages rendered, blank lines between) and its units."""
    parts: list[str] = []
    units: list[UnitDraft] = []
    at = 0
    for item in messages:
        rendered = render_message(item)
        body = _body(item)
        body_at = at + len(rendered) - len(body)
        for start, end in _windows(body, policy, count) if body else []:
            if len(units) < policy.max_units:
                units.append(
                    UnitDraft(
                        ord=len(units),
                        seq=item.seq,
                        created_at=item.created_at,
                        start=body_at + start,
                        end=body_at + end,
                        speaker=item.message.name,
                    )
                )
        parts.append(rendered)
        at += len(rendered) + 2
    return "\n\n".join(parts), tuple(units)


def _summary_hint(messages: Sequence[WindowMessage]) -> str:
    first_user = next((m for m in messages if m.message.role == "user"), messages[0])
    text = first_user.message.text
    words = text.split()
    hint = " ".join(words[:SUMMARY_HINT_WORDS]) if len(words) > 1 else text
    return hint[:SUMMARY_HINT_CHARS]


def _draft(
    messages: Sequence[WindowMessage],
    kind: ChunkKind,
    chunk_id: str,
    counter: TokenCounter,
    units: UnitPolicy,
) -> ChunkDraft:
    raw_text, unit_drafts = _layout(messages, units, counter.count)
    sources, blobs = archived(messages)
    return ChunkDraft(
        id=chunk_id,
        kind=kind,
        seqs=tuple(m.seq for m in messages),
        turn_start=min(m.turn for m in messages),
        turn_end=max(m.turn for m in messages),
        roles=tuple(dict.fromkeys(m.message.role for m in messages)),
        first_ts=min(m.created_at for m in messages),
        last_ts=max(m.created_at for m in messages),
        raw_text=raw_text,
        tokens=counter.count(raw_text),
        summary_hint=_summary_hint(messages),
        content_hash=content_hash(raw_text),
        lexical_terms=distinct_terms(raw_text),
        units=unit_drafts,
        sources=tuple(sources),
        blobs=tuple(blobs),
    )


REMEMBER_SEQ = 0  # a remembered point is no posted message; seq 0 is never a message's


def remember_draft(
    chunk_id: str, text: str, tokens: int, turn: int, now: datetime, role: str
) -> ChunkDraft:
    """A chunk for a point stored through `remember`, dated to the session's latest turn."""
    return ChunkDraft(
        id=chunk_id,
        kind=ChunkKind.REMEMBER,
        seqs=(REMEMBER_SEQ,),
        turn_start=turn,
        turn_end=turn,
        roles=(role,),
        first_ts=now,
        last_ts=now,
        raw_text=text,
        tokens=tokens,
        summary_hint=text[:SUMMARY_HINT_CHARS],
        content_hash=content_hash(text),
        lexical_terms=distinct_terms(text),
        units=(UnitDraft(0, REMEMBER_SEQ, now, 0, len(text)),),
    )


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def unit_text(unit: Sequence[WindowMessage]) -> str:
    return "\n\n".join(render_message(m) for m in unit)


def message_unit_texts(
    item: WindowMessage, policy: UnitPolicy, count: Callable[[str], int]
) -> list[str]:
    """What gets embedded for one message: the texts of its units, the same wherever the
    message ends up (a chunk's units are its messages' units)."""
    raw_text, units = _layout([item], policy, count)
    return [unit.text(raw_text) for unit in units]


@dataclass(frozen=True)
class TopicPolicy:
    min_tokens: int
    max_tokens: int
    similarity: float
    overlap: bool
    units: UnitPolicy


def segment(
    unit_tokens: Sequence[int], vectors: Sequence[Sequence[float]] | None, policy: TopicPolicy
) -> list[list[int]]:
    """Groups of consecutive unit indices. A group closes before a unit that would pass
    `max_tokens`, or at a topic change (neighbour cosine below `similarity`) once it holds
    `min_tokens`. Without vectors only the token bound applies."""
    groups: list[list[int]] = []
    size = 0
    for index, tokens in enumerate(unit_tokens):
        topic_change = (
            vectors is not None
            and index > 0
            and cosine(vectors[index - 1], vectors[index]) < policy.similarity
            and size >= policy.min_tokens
        )
        if not groups or size + tokens > policy.max_tokens or topic_change:
            groups.append([])
            size = 0
        groups[-1].append(index)
        size += tokens
    return groups


def build_chunks(
    units: Sequence[Sequence[WindowMessage]],
    counter: TokenCounter,
    policy: TopicPolicy,
    *,
    new_id: Callable[[], str],
    vectors: Sequence[Sequence[float]] | None = None,
) -> list[tuple[ChunkDraft, list[float] | None]]:
    """Chunks from consecutive units (oldest first), each with the mean of its units' vectors
    (None without vectors). With `overlap`, a chunk also repeats the previous one's last unit."""
    unit_tokens = [counter.count(unit_text(unit)) for unit in units]
    built: list[tuple[ChunkDraft, list[float] | None]] = []
    for number, group in enumerate(segment(unit_tokens, vectors, policy)):
        pace()
        indices = [group[0] - 1, *group] if policy.overlap and number > 0 else group
        messages = [m for index in indices for m in units[index]]
        draft = _draft(messages, ChunkKind.OFFLOAD, new_id(), counter, policy.units)
        vector = mean_vector([vectors[i] for i in indices]) if vectors is not None else None
        built.append((draft, vector))
    return built


def oversize_limit(available: int, fraction: float, max_tokens: int) -> int:
    """Above this many content tokens a single message goes to its own chunk."""
    return max(1, min(int(fraction * available), max_tokens))


def _clip(line: str, max_chars: int) -> str:
    return line if len(line) <= max_chars else line[:max_chars] + " […]"


def make_stub(
    chunk_id: str, text: str, tokens: int, head_lines: int, tail_lines: int, max_line_chars: int
) -> str:
    """The window's stand-in for an oversize message: traceable by id, with its first and
    last lines (each clipped, so one enormous line cannot rebuild the whole text)."""
    lines = text.splitlines()
    shown_head = lines[:head_lines]
    shown_tail = lines[max(head_lines, len(lines) - tail_lines) :] if tail_lines else []
    omitted = len(lines) - len(shown_head) - len(shown_tail)
    parts = [
        f"[stored as chunk {chunk_id}: {tokens} tokens, {len(text)} characters, "
        f"{len(lines)} lines; fetch it with recall or GET /sessions/{{id}}/chunks/{chunk_id}]",
        *(_clip(line, max_line_chars) for line in shown_head),
    ]
    if omitted > 0:
        parts.append(f"[… {omitted} lines not shown …]")
    parts.extend(_clip(line, max_line_chars) for line in shown_tail)
    return "\n".join(parts)


def oversize_chunk(
    item: WindowMessage, counter: TokenCounter, chunk_id: str, units: UnitPolicy
) -> ChunkDraft:
    """A chunk holding one oversize message verbatim; `item` carries the posted text."""
    return _draft([item], ChunkKind.OVERSIZE, chunk_id, counter, units)
