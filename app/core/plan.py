"""Planning a turn, with no I/O: what to store, what to offload, what the prompt becomes.

The plan is computed from a snapshot read outside any transaction; the write step re-checks
the session version, so a plan never outlives the state it was made from. Every number it
uses arrives in a `PlanPolicy` (built from the settings by the caller) or in the session's
own sticky overrides; it raises a domain error before anything is written when the turn is
invalid (unknown model, no room for the reserve, a bad policy override, an orphan tool result,
a turn that cannot fit the budget even with its text stored as chunks).

The ceiling (docs/DESIGN.md §2): no prompt passes C − r. The plan keeps its share of that
promise: an offload lands at the target unless only the current turn is left; the current
turn's own messages are stubbed, largest first, until it fits under the emergency line with
room for the notes at their cap; an offload makes room for the notes it renders (as drafted
by the caller, or at their cap); the notes get a cap that fits what the window leaves
(`TurnPlan.notes_cap`). Recall fills at most R of the rest (services/turn_recall.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from app.core import budget as policy_math
from app.core.assemble import PromptFormat
from app.core.budget import Budget, Level, Policy
from app.core.chunker import (
    UnitPolicy,
    as_budget_unit,
    group_units,
    make_stub,
    oversize_chunk,
    oversize_limit,
)
from app.core.errors import (
    DuplicateToolCall,
    InvalidPolicyOverride,
    InvalidWindow,
    OrphanToolResult,
    TurnExceedsBudget,
    UnknownModel,
)
from app.core.facts import CarryFacts, Fact
from app.core.formats import SystemPrompt, stubbed
from app.core.messages import Message
from app.core.notes import NotesBody
from app.core.ports import TokenCounter
from app.core.results import RecallMode
from app.core.tokens import (
    calibrated,
    count_message,
    count_system,
    prompt_tokens,
    update_calibration,
    window_for_model,
)
from app.core.transcript import StoredEntry, message_digest
from app.core.types import ChunkDraft, WindowMessage, session_key

POLICY_FIELDS = (
    "offload_ratio",
    "emergency_ratio",
    "target_ratio",
    "floor_turns",
    "floor_tokens",
    "cooldown_turns",
    "floor_max_share",
)


@dataclass(frozen=True)
class StubShape:
    """How an oversize message's stub quotes it: its first and last lines, each clipped."""

    head_lines: int
    tail_lines: int
    line_chars: int


@dataclass(frozen=True)
class Calibration:
    """How fast the estimate follows the provider's reported prompt size, and its bounds."""

    alpha: float
    lower: float
    upper: float

    def follow(self, ratio: float, observed: int, estimated: int) -> float:
        """The ratio after the provider reported `observed` for a prompt estimated at
        `estimated` (core/tokens.py: update_calibration)."""
        return update_calibration(
            ratio, observed, estimated, alpha=self.alpha, lower=self.lower, upper=self.upper
        )


@dataclass(frozen=True)
class PlanPolicy:
    """The settings a plan is made under (the session's overrides apply on top)."""

    default_model: str | None
    policy: Policy  # watermark ratios, floor and cooldown before the session's overrides
    reserve_tokens: int
    reserve_max_fraction: float
    oversize_fraction: float
    oversize_max_tokens: int
    stub: StubShape
    calibration: Calibration
    units: UnitPolicy
    recall_share: float  # of C − r, kept for automatic recall (`Budget.recall_share`)
    notes_cap_tokens: int  # the scratchpad block's cap in any window
    notes_max_share: float  # ... and at most this share of C − r


@dataclass(frozen=True)
class TurnInput:
    session_id: str
    messages: Sequence[Message]
    tenant_id: str
    system: SystemPrompt | None = None  # None: the session's, unchanged
    tools: list[Any] | None = None
    model: str | None = None
    context_window: int | None = None
    reserve_tokens: int | None = None
    policy: dict[str, Any] | None = None
    recall: RecallMode = "auto"
    observed_prompt_tokens: int | None = None
    observed_cached_tokens: int | None = None
    prompt_format: PromptFormat = PromptFormat.OPENAI
    idempotency_key: str | None = None
    request_hash: str = ""
    # The messages are the client's whole history (proxy mode), not only its new ones: the
    # turn stores what the transcript lacks (app/core/transcript.py).
    whole_history: bool = False
    carry_facts: CarryFacts | None = None  # start from these facts of another session

    @property
    def key(self) -> str:
        """The session's stored key (tenant and id)."""
        return session_key(self.tenant_id, self.session_id)


@dataclass(frozen=True)
class Snapshot:
    """The session as read before planning (`exists` False for a session's first turn)."""

    exists: bool
    version: int = 0
    turn_count: int = 0
    next_seq: int = 1
    model: str | None = None
    context_window: int | None = None
    reserve_tokens: int | None = None
    system_prompt: SystemPrompt | None = None
    tools: list[Any] | None = None
    c0_tokens: int = 0
    policy: dict[str, Any] = field(default_factory=dict)
    calibration_ratio: float = 1.0
    last_prompt_estimate: int | None = None
    last_offload_turn: int | None = None
    offload_until_tokens: int | None = None  # a manual offload asked through the memory tool
    window: Sequence[WindowMessage] = ()
    notes_text: str | None = None
    notes_tokens: int = 0
    notes_body: NotesBody = field(default_factory=NotesBody)
    notes_needs_rebuild: bool = False
    notes_exists: bool = False  # the notes row is there (written by an earlier turn)
    facts: Sequence[Fact] = ()
    carried: Sequence[Fact] = ()  # facts `carry_facts` brings in with this turn (no ids yet)
    has_chunks: bool = False
    transcript: Sequence[StoredEntry] = ()  # read for a whole-history turn only


@dataclass(frozen=True)
class SessionConfig:
    """The session's sticky settings after this turn's overrides."""

    model: str | None
    context_window_override: int | None
    reserve_tokens: int | None
    system_prompt: SystemPrompt | None
    tools: list[Any] | None
    c0_tokens: int
    policy_overrides: dict[str, Any]
    policy: Policy
    budget: Budget


def held_recall_tokens(window: Sequence[WindowMessage]) -> int:
    """Tokens of the recalled blocks the window holds as history. They live in R, the share
    kept for recall (`Budget.recall_share`), not under the watermark, which measures the
    prompt without recalled text."""
    return sum(m.recalled.tokens for m in window if m.recalled is not None)


@dataclass(frozen=True)
class RecallRoom:
    """Estimated tokens recalled text may take in a turn's prompt: `total` for the blocks the
    window holds and this turn's together, `block` for this turn's alone."""

    total: int
    block: int


def recall_room(budget: Budget, policy: Policy, prompt_estimate: int, ratio: float) -> RecallRoom:
    """Beside a prompt of `prompt_estimate` without recalled text: this turn's block at most
    R; all of it up to R above the emergency line, and never past C − r. The products are
    not rounded, so the calibrated prompt with the room filled stays within C − r."""
    top = min(budget.line(policy.emergency_ratio) + budget.recall_share, budget.ceiling)
    total = max(0, math.floor((top - prompt_estimate * ratio) / ratio))
    return RecallRoom(total=total, block=min(total, math.floor(budget.recall_share / ratio)))


@dataclass(frozen=True)
class TurnPlan:
    """What a turn will write. Between offloads the prompt only grows: a recalled block,
    once injected, stays in the window before the message it came with. A triggered offload
    moves the oldest messages to C3 and clears every recalled block (the prefix changes
    there anyway), so the chunks they quoted can be recalled afresh."""

    turn: int
    config: SessionConfig
    new_messages: list[WindowMessage]
    oversize_drafts: list[ChunkDraft]
    offload_units: list[list[WindowMessage]]
    window_after: list[WindowMessage]
    estimate_before: int
    estimate_after: int
    calibration_ratio: float
    level: Level
    floor_yielded: bool
    notes_cap: int  # tokens the notes block may take if this turn renders it
    clears_recall: bool = False  # the window's recalled blocks go (an offload was triggered)
    # Window messages of this turn stored ahead of it: a reply the proxy recorded from the
    # model. They are the turn's first messages (notes read them with the new ones).
    recorded: tuple[WindowMessage, ...] = ()

    @property
    def prompt_tokens_before(self) -> int:
        return calibrated(self.estimate_before, self.calibration_ratio)

    @property
    def prompt_tokens_after(self) -> int:
        return calibrated(self.estimate_after, self.calibration_ratio)

    @property
    def offloaded(self) -> bool:
        return bool(self.offload_units)


def session_budget(
    rules: PlanPolicy,
    window: int,
    reserve_override: int | None,
    recall: RecallMode = "auto",
    holds_recall: bool = False,
) -> Budget:
    """C, r and R, the share kept for automatic recall: none for a turn with recall off,
    unless the window still holds recalled blocks (they keep their room, and their place in
    the prompt's prefix)."""
    reserve = policy_math.resolve_reserve(
        window, reserve_override, rules.reserve_tokens, rules.reserve_max_fraction
    )
    share = 0.0 if recall == "off" and not holds_recall else rules.recall_share
    return Budget(window, reserve, recall_share=int(share * max(0, window - reserve)))


def session_policy(rules: PlanPolicy, overrides: dict[str, Any]) -> Policy:
    """The default policy with the session's overrides; raises InvalidPolicy."""
    return replace(rules.policy, **overrides)


def resolve_config(
    inp: TurnInput, snap: Snapshot, counter: TokenCounter, rules: PlanPolicy
) -> SessionConfig:
    model = inp.model or snap.model or rules.default_model
    window = inp.context_window or snap.context_window or window_for_model(model)
    if window is None:
        raise UnknownModel(
            f"no context window is known for model {model!r}; send context_window "
            "(through the proxy: the X-Ebbtide-Context-Window header)",
            field="context_window",
            model=model,
        )
    reserve_override = inp.reserve_tokens if inp.reserve_tokens is not None else snap.reserve_tokens
    holds_recall = held_recall_tokens(snap.window) > 0
    budget = session_budget(rules, window, reserve_override, inp.recall, holds_recall)
    if budget.reserve >= window:
        raise InvalidWindow(
            "reserve_tokens must be smaller than context_window",
            field="reserve_tokens",
            reserve_tokens=budget.reserve,
            context_window=window,
        )
    overrides = {**snap.policy, **(inp.policy or {})}
    try:
        policy = session_policy(rules, overrides)
    except policy_math.InvalidPolicy as error:
        raise InvalidPolicyOverride(str(error), field="policy", policy=overrides) from error
    system = inp.system if inp.system is not None else snap.system_prompt
    tools = inp.tools if inp.tools is not None else snap.tools
    c0 = snap.c0_tokens
    if inp.system is not None or inp.tools is not None or not snap.exists:
        c0 = count_system(counter, system.text if system else None, tools)
    return SessionConfig(
        model=model,
        context_window_override=inp.context_window or snap.context_window,
        reserve_tokens=reserve_override,
        system_prompt=system,
        tools=tools,
        c0_tokens=c0,
        policy_overrides=overrides,
        policy=policy,
        budget=budget,
    )


def check_tool_results(window: Sequence[WindowMessage], messages: Sequence[Message]) -> None:
    """Every tool result must answer an assistant call that is still waiting for it, and a
    call id names one call: no two calls of the turn, or a call still open, share it."""
    open_calls: set[str] = set()
    for item in window:
        open_calls.update(call.id for call in item.message.calls)
        open_calls.difference_update(item.message.answered_ids)
    called: set[str] = set()
    for index, message in enumerate(messages):
        for call in message.calls:
            if call.id in called or call.id in open_calls:
                raise DuplicateToolCall(
                    f"messages[{index}] reuses tool call id {call.id!r}",
                    field=f"messages[{index}]",
                    tool_call_id=call.id,
                )
            called.add(call.id)
            open_calls.add(call.id)
        for call_id in message.answered_ids:
            if call_id not in open_calls:
                raise OrphanToolResult(
                    f"messages[{index}] answers tool call {call_id!r}, but no assistant "
                    "message in the window or earlier in this turn made that call",
                    field=f"messages[{index}]",
                    tool_call_id=call_id,
                )
            open_calls.discard(call_id)


def message_turns(inp: TurnInput, snap: Snapshot) -> list[int]:
    """The turn of each new message. A turn's messages are one call's; a whole history
    (proxy mode) adding many at once spans as many turns as it has conversation turns — one
    ends with each user input — so its older ones are no more pinned than any earlier turn's."""
    turn = snap.turn_count + 1
    turns = []
    for index, message in enumerate(inp.messages):
        follows_user = index > 0 and inp.messages[index - 1].role == "user"
        if inp.whole_history and follows_user and message.role != "user":
            turn += 1
        turns.append(turn)
    return turns


BARE_STUB = StubShape(head_lines=0, tail_lines=0, line_chars=1)  # the id and the size only


@dataclass
class _Stubs:
    """Oversize chunks of the turn's messages and their stubs: one chunk per message, however
    often its stub is made again in a smaller shape."""

    counter: TokenCounter
    units: UnitPolicy
    new_id: Callable[[], str]
    drafts: dict[int, ChunkDraft] = field(default_factory=dict)
    originals: dict[int, WindowMessage] = field(default_factory=dict)

    def original(self, item: WindowMessage) -> WindowMessage:
        return self.originals.get(item.seq, item)

    def stub(self, item: WindowMessage, shape: StubShape) -> WindowMessage:
        original = self.originals.setdefault(item.seq, item)
        draft = self.drafts.get(item.seq)
        if draft is None:
            draft = oversize_chunk(original, self.counter, self.new_id(), self.units)
            self.drafts[item.seq] = draft
        text = make_stub(
            draft.id,
            original.message.text,
            original.tokens,
            shape.head_lines,
            shape.tail_lines,
            shape.line_chars,
        )
        message = stubbed(original.message, text)
        tokens = count_message(self.counter, message)
        return replace(original, message=message, tokens=tokens, stub_chunk_id=draft.id)


def window_notes_cap(rules: PlanPolicy, budget: Budget) -> int:
    """The notes block's cap in this window: the configured cap, at most a share of C − r."""
    return min(rules.notes_cap_tokens, int(rules.notes_max_share * budget.ceiling))


def _fit_current_turn(
    staged: list[WindowMessage], room: int, stubs: _Stubs, shape: StubShape
) -> list[WindowMessage]:
    """The current turn within `room` tokens if stubs can make it so: its largest text
    messages are stored as chunks first, then their stubs shrink to the id and size."""
    current = staged[-1].turn if staged else 0
    items = list(staged)
    for step in (shape, BARE_STUB):
        by_size = sorted(
            (
                i
                for i, m in enumerate(items)
                if m.turn == current and stubs.original(m).message.text
            ),
            key=lambda i: -stubs.original(items[i]).tokens,
        )
        for index in by_size:
            if sum(m.tokens for m in items if m.turn == current) <= room:
                return items
            smaller = stubs.stub(items[index], step)
            if smaller.tokens < items[index].tokens:
                items[index] = smaller
    return items


def stage_messages(
    inp: TurnInput,
    snap: Snapshot,
    config: SessionConfig,
    counter: TokenCounter,
    rules: PlanPolicy,
    now: datetime,
    new_id: Callable[[], str],
    ratio: float = 1.0,
) -> tuple[list[WindowMessage], list[ChunkDraft]]:
    """Numbers the new messages and moves oversize ones to chunks of their own at once; then
    stubs more of the current turn until it fits under the emergency line beside C0 and the
    notes (at their cap), so that offloading everything older always brings the prompt
    under the budget. `ratio`: the session's calibration."""
    turns = message_turns(inp, snap)
    budget = config.budget
    limit = oversize_limit(
        budget.watermark_base, rules.oversize_fraction, rules.oversize_max_tokens
    )
    stubs = _Stubs(counter, rules.units, new_id)
    staged: list[WindowMessage] = []
    for offset, message in enumerate(inp.messages):
        item = WindowMessage(
            seq=snap.next_seq + offset,
            turn=turns[offset],
            message=message,
            tokens=count_message(counter, message),
            created_at=message.created_at or now,
            digest=message_digest(message),
        )
        staged.append(
            stubs.stub(item, rules.stub) if item.tokens > limit and message.text else item
        )
    notes = max(snap.notes_tokens, window_notes_cap(rules, budget))
    line = budget.line(config.policy.emergency_ratio)
    room = int(line / ratio) - config.c0_tokens - notes
    staged = _fit_current_turn(staged, room, stubs, rules.stub)
    return staged, [stubs.drafts[seq] for seq in sorted(stubs.drafts)]


def _check_fits(
    config: SessionConfig, snap: Snapshot, staged: Sequence[WindowMessage], ratio: float
) -> None:
    """Raises when C0, the notes and the current turn (stubbed as far as it goes) alone pass
    the budget C − r: no offload could make that prompt fit."""
    current = staged[-1].turn if staged else 0
    turn_tokens = sum(m.tokens for m in staged if m.turn == current)
    needed = calibrated(config.c0_tokens + snap.notes_tokens + turn_tokens, ratio)
    if needed > config.budget.ceiling:
        raise TurnExceedsBudget(
            f"this turn needs {needed} tokens with its text messages stored as chunks "
            f"(system prompt and tools {config.c0_tokens}, notes {snap.notes_tokens}), "
            f"more than the budget of {config.budget.ceiling} (context_window − reserve_tokens)",
            field="messages",
            needed_tokens=needed,
            budget=config.budget.ceiling,
        )


def _notes_cap(rules: PlanPolicy, budget: Budget, without_notes: int, ratio: float) -> int:
    """What a notes block rendered by this turn may take: the window's cap, and no more than
    the prompt after the offload (`without_notes`, estimated) leaves under C − r."""
    return max(0, min(window_notes_cap(rules, budget), int(budget.ceiling / ratio) - without_notes))


def _calibration(inp: TurnInput, snap: Snapshot, rules: Calibration) -> float:
    if inp.observed_prompt_tokens is None or snap.last_prompt_estimate is None:
        return snap.calibration_ratio
    return rules.follow(
        snap.calibration_ratio, inp.observed_prompt_tokens, snap.last_prompt_estimate
    )


def plan_turn(
    inp: TurnInput,
    snap: Snapshot,
    counter: TokenCounter,
    rules: PlanPolicy,
    now: datetime,
    new_id: Callable[[], str],
    notes_tokens_after: int | None = None,
) -> TurnPlan:
    """Validates the turn and decides everything it will write. Raises before any write.

    `notes_tokens_after`: what the notes an offload renders will take, when the caller knows
    (the extractive notes, drafted from this turn's facts); unknown, the batch makes room for
    the notes at their cap."""
    config = resolve_config(inp, snap, counter, rules)
    check_tool_results(snap.window, inp.messages)
    ratio = _calibration(inp, snap, rules.calibration)
    staged, oversize = stage_messages(inp, snap, config, counter, rules, now, new_id, ratio)
    _check_fits(config, snap, staged, ratio)
    first_turn = snap.turn_count + 1
    turn = staged[-1].turn if staged else first_turn
    window = [*snap.window, *staged]
    estimate = prompt_tokens([config.c0_tokens, snap.notes_tokens, *(m.tokens for m in window)])
    usage = calibrated(estimate, ratio)
    level = policy_math.level_for(usage, config.budget, config.policy)
    cooling = policy_math.in_cooldown(turn, snap.last_offload_turn, config.policy)
    chosen: list[list[WindowMessage]] = []
    floor_yielded = False
    manual = snap.offload_until_tokens
    triggered = manual is not None or policy_math.should_offload(level, cooling)
    if triggered:
        groups = group_units(window)
        units = [as_budget_unit(group, turn, ratio) for group in groups]
        # The notes are rendered anew by this turn: the batch makes room for what they grow
        # by, so that the prompt lands at the target with the new notes in it.
        notes_after = notes_tokens_after
        if notes_after is None:
            notes_after = window_notes_cap(rules, config.budget)
        growth = max(0, notes_after - snap.notes_tokens)
        planned = usage + calibrated(growth, ratio)
        offload = policy_math.plan_offload(units, planned, config.budget, config.policy, manual)
        chosen = groups[: len(offload.units)]
        floor_yielded = offload.floor_yielded
    moved = {m.seq for unit in chosen for m in unit}
    window_after = [m for m in window if m.seq not in moved]
    freed = sum(m.tokens for m in window if m.seq in moved)
    clears_recall = triggered and held_recall_tokens(snap.window) > 0
    if clears_recall:  # the prefix changes here anyway: the recall room is emptied too
        window_after = [replace(m, recalled=None) for m in window_after]
    return TurnPlan(
        turn=turn,
        config=config,
        new_messages=staged,
        oversize_drafts=oversize,
        offload_units=chosen,
        window_after=window_after,
        estimate_before=estimate,
        estimate_after=estimate - freed,
        calibration_ratio=ratio,
        level=level,
        floor_yielded=floor_yielded,
        notes_cap=_notes_cap(rules, config.budget, estimate - freed - snap.notes_tokens, ratio),
        clears_recall=clears_recall,
        recorded=tuple(m for m in snap.window if m.turn == first_turn),
    )
