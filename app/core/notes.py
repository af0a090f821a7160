"""The scratchpad (C2): goal, done, open items, key constraints, recent decisions, key facts.

Policy:
- The body (goal, done, open tasks) is updated from new messages only; constraints,
  decisions, pending actions and key facts come from the facts (app/core/facts.py), verbatim.
- Rendered as a compact block under a hard token cap. Over the cap, items go in this order:
  done first, then key facts, decisions, the goal, open items; constraints last, oldest
  first within a section.
- Consistency: every active constraint or preference must appear with its scope words
  (只 / 仅 / 不要 / only / never / must …) and most of its content in any notes text, or the
  notes are rejected (an LLM's notes), so a summary never weakens a constraint.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.facts import (
    CONSTRAINT_EN,
    CONSTRAINT_ZH,
    Fact,
    FactKind,
    FactStatus,
    SourceMessage,
    content_tokens,
    overlap,
    sentences,
)
from app.core.pace import pace
from app.core.stated import is_question

GOAL_CUES = re.compile(
    r"(目标是|我想|我需要|帮我|请帮|\bgoal\b|\bi want to\b|\bi need to\b|\bhelp me\b"
    r"|\bwe need to\b)",
    re.IGNORECASE,
)
NEW_GOAL = re.compile(r"(新目标|目标改为|目标变成|\bnew goal\b|\bgoal is now\b)", re.IGNORECASE)
# A task: asked for ("please …", "can you …", "帮我 …"), or, in a statement, told as an
# imperative ("Send the packing list", "Fine, get separate cover then"), needed ("I need a
# plan", "the status page needs an update") or due ("has to be filed by Friday",
# "新机2月18日之前发出"). One said with must / 必须 is a constraint already, kept word for word.
TASK_CUES = re.compile(
    r"^(请|帮我|麻烦|需要|要做|让|please\b|can you\b|could you\b)|\b(todo|to-do|need to)\b",
    re.IGNORECASE,
)
STATED_TASK_CUES = re.compile(
    r"^(?:(?:ok|okay|fine|right|so|then|also|and),?\s+)?(?:send|write|draft|book|prepare|get|"
    r"find|file|call|email|schedule|update|ship|fix|order|reserve|arrange|collect|confirm|"
    r"submit|sign)\b"
    r"|\b(?:i )?need (?:a|an|the|your|some)\b|\bneeds? (?:an? |to be )"
    r"|\b(?:has|have) to (?:be|go)\b|\bshould (?:be|go out)\b|\b(?:is|are) due\b"
    r"|得(?:开始|尽快)|(?:之前|以前|前)(?:发出|完成|交|提交|修好)|(?<!不)要(?:退|跟|排|交|发|准备)",
    re.IGNORECASE,
)


def _sets_task(sentence: str) -> bool:
    return bool(TASK_CUES.search(sentence)) or (
        bool(STATED_TASK_CUES.search(sentence)) and not is_question(sentence)
    )


# A request for information is answered by a reply, not done by an action: "Please give me a
# detailed comparison of …" leaves the open items when the assistant's answer comes.
INFO_REQUEST = re.compile(
    r"\b(?:give me|tell me|show me|explain|compare|comparison|list (?:all|the|every|me)|"
    r"summari[sz]e|overview|"
    r"describe|what|which|how|why|look up|find out|check whether)\b"
    r"|介绍|解释|比较|对比|列出|列一下|告诉我|查一下|查查|说明|总结|分析|有哪些|是什么|怎么|为什么",
    re.IGNORECASE,
)
DONE_CUES = re.compile(
    r"(已完成|完成了|已经(?:导出|生成|发送|更新|修复|创建)|已导出|搞定|"
    r"\bdone\b|\bfinished\b|\bcompleted\b|\bi(?:'ve| have) (?:created|exported|sent|updated|"
    r"fixed|generated|written)\b|\bexported\b)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class NotesLimits:
    """How many items of each kind the notes keep (newest win), and the consistency rule."""

    max_done: int
    max_open: int
    max_decisions: int
    max_key_facts: int
    min_shared_for_done: int  # content words a done line shares with the task it closes
    min_content_kept: float  # share of a constraint's content words a line must keep
    merge_similarity: float = 0.8  # content-word overlap (Jaccard) at which two items are one


@dataclass
class NotesBody:
    goal: str | None = None
    done: list[dict[str, Any]] = field(default_factory=list)
    open: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"goal": self.goal, "done": self.done, "open": self.open}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NotesBody:
        return cls(
            goal=data.get("goal"), done=list(data.get("done", [])), open=list(data.get("open", []))
        )


def _finishes(done_text: str, task_text: str, min_shared: int) -> bool:
    return len(content_tokens(done_text) & content_tokens(task_text)) >= min_shared


def _answers(reply: str, task: dict[str, Any], limits: NotesLimits) -> bool:
    """An assistant reply that is no question of its own answers an earlier request for
    information it shares content words with."""
    asked_back = reply.rstrip().endswith(("?", "？"))
    return (
        bool(task.get("asks"))
        and not asked_back
        and _finishes(reply, task["text"], limits.min_shared_for_done)
    )


def update_body(
    body: NotesBody, messages: Sequence[SourceMessage], limits: NotesLimits
) -> NotesBody:
    """The body after the new messages (a new object; `body` is left as it was)."""
    goal, done, open_items = body.goal, list(body.done), list(body.open)
    for message in messages:
        pace()
        for sentence in sentences(message.text):
            if message.role == "user":
                if NEW_GOAL.search(sentence) or (goal is None and GOAL_CUES.search(sentence)):
                    goal = sentence
                elif _sets_task(sentence) and not any(
                    overlap(sentence, o["text"]) >= limits.merge_similarity for o in open_items
                ):
                    asks = bool(INFO_REQUEST.search(sentence))
                    open_items.append({"text": sentence, "turn": message.turn, "asks": asks})
            elif DONE_CUES.search(sentence):
                done.append({"text": sentence, "turn": message.turn})
                open_items = [
                    o
                    for o in open_items
                    if not _finishes(sentence, o["text"], limits.min_shared_for_done)
                ]
        if message.role != "user":
            answered = [
                o
                for o in open_items
                if o["turn"] < message.turn and _answers(message.text, o, limits)
            ]
            done += [{"text": f"answered: {o['text']}", "turn": message.turn} for o in answered]
            open_items = [o for o in open_items if o not in answered]
    return NotesBody(goal=goal, done=done[-limits.max_done :], open=open_items[-limits.max_open :])


@dataclass(frozen=True)
class _Item:
    section: str
    text: str
    priority: int  # lower goes first when over the cap
    order: int  # older first within a priority


# What the user stated (amounts, days, parties, identifiers) and other sentences with numbers.
KEY_FACT_KINDS = (
    FactKind.AMOUNT,
    FactKind.DATE,
    FactKind.PARTY,
    FactKind.IDENTIFIER,
    FactKind.NUMBER,
    FactKind.NAME,
)
SECTIONS = ("Goal", "Constraints", "Open items", "Decisions", "Key facts", "Done")
PRIORITY = {"Done": 0, "Key facts": 1, "Decisions": 2, "Goal": 3, "Open items": 4, "Constraints": 5}


def said_at(fact: Fact) -> str:
    """Where a fact was said: its turn, and the session for one carried from another."""
    if fact.carried is not None:
        return f"session {fact.carried.session_id}, turn {fact.source_turn}"
    return f"turn {fact.source_turn}"


def _items(body: NotesBody, facts: Sequence[Fact], limits: NotesLimits) -> list[_Item]:
    active = [f for f in facts if f.status is FactStatus.ACTIVE]
    by_kind: dict[FactKind, list[Fact]] = {}
    for fact in sorted(active, key=lambda f: f.source_turn):
        by_kind.setdefault(fact.kind, []).append(fact)
    items: list[_Item] = []

    def add(section: str, text: str, order: int) -> None:
        items.append(_Item(section, text, PRIORITY[section], order))

    if body.goal:
        add("Goal", body.goal, 0)
    for fact in by_kind.get(FactKind.CONSTRAINT, []) + by_kind.get(FactKind.PREFERENCE, []):
        add("Constraints", f"{fact.text} ({said_at(fact)})", fact.source_turn)
    for fact in by_kind.get(FactKind.PENDING_ACTION, []):
        add("Open items", f"PENDING: {fact.text} ({said_at(fact)})", fact.source_turn)
    for task in body.open:
        add("Open items", f"{task['text']} (turn {task['turn']})", task["turn"])
    for fact in by_kind.get(FactKind.DECISION, [])[-limits.max_decisions :]:
        add("Decisions", f"{said_at(fact)}, {fact.role}: {fact.text}", fact.source_turn)
    key_facts = sorted(
        (f for kind in KEY_FACT_KINDS for f in by_kind.get(kind, [])), key=lambda f: f.source_turn
    )
    for fact in key_facts[-limits.max_key_facts :]:
        add("Key facts", f"{fact.text} ({said_at(fact)})", fact.source_turn)
    resolved = [f for f in facts if f.status is FactStatus.RESOLVED]
    for fact in resolved[-limits.max_done :]:
        add("Done", f"confirmed: {fact.text}", fact.source_turn)
    for entry in body.done:
        add("Done", f"{entry['text']} (turn {entry['turn']})", entry["turn"])
    return items


def _render(items: Sequence[_Item]) -> str:
    lines: list[str] = []
    for section in SECTIONS:
        entries = [i for i in items if i.section == section]
        if entries:
            lines.append(f"[{section}]")
            lines.extend(f"- {i.text}" for i in sorted(entries, key=lambda i: i.order))
    return "\n".join(lines)


def render(
    body: NotesBody,
    facts: Sequence[Fact],
    *,
    cap_tokens: int,
    count: Callable[[str], int],
    limits: NotesLimits,
) -> str:
    """The notes block within `cap_tokens`, lowest-priority and oldest items cut first.

    Each line is counted once and lines are dropped against the sum, so the cost is linear
    in the number of items (re-counting the whole block after every drop made a session
    with hundreds of facts spend most of each offload here). Lines tokenize almost
    additively; the exact count of the result is checked and the loop goes on if needed."""
    items = _items(body, facts, limits)
    line_cost = [count(f"- {item.text}") + 1 for item in items]
    header_cost = {section: count(f"[{section}]") + 1 for section in SECTIONS}
    per_section: dict[str, int] = {}
    for item in items:
        per_section[item.section] = per_section.get(item.section, 0) + 1
    estimate = sum(line_cost) + sum(header_cost[s] for s in per_section)
    dropped: set[int] = set()
    for index in sorted(range(len(items)), key=lambda i: (items[i].priority, items[i].order)):
        if estimate <= cap_tokens:
            break
        dropped.add(index)
        estimate -= line_cost[index]
        per_section[items[index].section] -= 1
        if per_section[items[index].section] == 0:
            estimate -= header_cost[items[index].section]
    kept = [item for index, item in enumerate(items) if index not in dropped]
    text = _render(kept)
    while kept and count(text) > cap_tokens:
        kept.remove(min(kept, key=lambda i: (i.priority, i.order)))
        text = _render(kept)
    return text


def scope_words(text: str) -> list[str]:
    words = [cue for cue in CONSTRAINT_ZH if cue in text]
    words += [m.group(0).lower() for m in CONSTRAINT_EN.finditer(text)]
    return words


def _kept_by(line: str, fact: Fact, min_content_kept: float) -> bool:
    """Whether one line of notes states the fact: its scope words, its numbers, and most of
    its content."""
    lowered = line.lower()
    if not all(word in lowered for word in scope_words(fact.text)):
        return False
    tokens = content_tokens(fact.text)
    present = content_tokens(line)
    numbers = {t for t in tokens if any(ch.isdigit() for ch in t)}
    kept = len(tokens & present) / len(tokens) if tokens else 1.0
    return numbers <= present and kept >= min_content_kept


def weakened(notes: str, facts: Sequence[Fact], *, min_content_kept: float) -> list[Fact]:
    """The active constraints and preferences that no line of `notes` states: one dropped,
    or weakened (a scope word or a number lost, or less than `min_content_kept` of it)."""
    lines = notes.splitlines() or [notes]
    return [
        fact
        for fact in facts
        if fact.status is FactStatus.ACTIVE
        and fact.kind in (FactKind.CONSTRAINT, FactKind.PREFERENCE)
        and not any(_kept_by(line, fact, min_content_kept) for line in lines)
    ]
