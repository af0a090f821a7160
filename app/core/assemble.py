"""Prompt assembly in cache-stable order (docs/DESIGN.md §1).

Order: C0 (system prompt) ⊕ C2 (scratchpad block) ⊕ C1 (window) ⊕ recalled block ⊕ x_t.
C0, C2 and the older part of C1 only change at an offload, so providers' prompt caches hit
between offloads; the per-turn recalled block sits just before the newest input x_t, which
starts at the current turn's last `user` message (or, with no user message in the turn, after
everything: tool results must stay right after the call that asked for them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.core.types import JsonObject, WindowMessage

NOTES_HEADER = "## Task scratchpad (Ebbtide notes)"
RECALL_HEADER = "## Earlier context recalled by Ebbtide (not in the window right now)"


@dataclass(frozen=True)
class PromptParts:
    system: str | None
    notes: str | None
    window: Sequence[WindowMessage]
    current_turn: int
    recalled: str | None = None


def recall_insert_index(window: Sequence[WindowMessage], current_turn: int) -> int:
    for index in range(len(window) - 1, -1, -1):
        item = window[index]
        if item.turn != current_turn:
            break
        if item.message.role == "user":
            return index
    return len(window)


def notes_block(notes: str | None) -> str | None:
    return f"{NOTES_HEADER}\n{notes}" if notes else None


def recalled_block(recalled: str | None) -> str | None:
    return f"{RECALL_HEADER}\n{recalled}" if recalled else None


def assemble(parts: PromptParts) -> list[JsonObject]:
    """The prompt in OpenAI chat format."""
    prompt: list[JsonObject] = []
    if parts.system:
        prompt.append({"role": "system", "content": parts.system})
    notes = notes_block(parts.notes)
    if notes:
        prompt.append({"role": "system", "content": notes})
    window = [item.message.to_openai() for item in parts.window]
    recalled = recalled_block(parts.recalled)
    if recalled:
        window.insert(
            recall_insert_index(parts.window, parts.current_turn),
            {"role": "system", "content": recalled},
        )
    prompt.extend(window)
    return prompt
