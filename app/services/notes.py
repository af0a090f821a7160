"""Updating C2, the scratchpad and its key facts, each turn (docs/DESIGN.md §1).

Facts are extracted from the new messages every turn and written with the turn; with a chat
model configured, the facts it proposes for the turn's user messages join them where the
message says them (app/core/proposed.py). The rendered
notes appear at the first turn that gives them something to say, then change only when the
window does (an offload), after a failed update, or when a new decision names an option
whose list has left the window (the notes are then the only place
that option's text is in the prompt), so C0 ⊕ C2 stay a stable prefix for provider caches
between offloads. With a chat model configured the model writes the notes from the
extractive draft; its text is kept only if no active constraint is dropped or weakened,
otherwise the extractive notes stand and the turn's event says which constraints the model
lost. Notes never fail a turn: on an unexpected error the previous C2 stays, `needs_rebuild`
is set and the next turn renders again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.core.assemble import notes_block
from app.core.facts import Fact, FactChanges, FactStatus, SourceMessage, apply, extract
from app.core.notes import NotesBody, render, update_body, weakened
from app.core.plan import Snapshot, TurnPlan, window_notes_cap
from app.core.ports import ChatModelUnavailable
from app.core.proposed import (
    PROPOSE_RULES,
    ProposalCheck,
    check_proposals,
    parse_proposals,
    proposal_prompt,
)
from app.core.results import ActiveFact, NotesSource, NotesSummary
from app.core.tokens import count_text_block
from app.services.context import ServiceContext
from app.services.policies import notes_limits, plan_policy

NOTES_RULES = """You keep the scratchpad of a long conversation between a user and an assistant.
Rewrite the draft notes below into the same sections ([Goal], [Constraints], [Open items],
[Decisions], [Key facts], [Done]), one short line per item, at most {cap} tokens.
Rules:
1. Keep facts themselves: what was decided, written, found, preferred. Never write "the user
   asked X" or "the assistant explained Y": write X and Y.
2. Copy every constraint word for word, with its scope words (only, never, must, 只, 仅, 不要,
   必须): never turn "only" into "prefer" or drop a limit.
3. Drop small talk, greetings, confirmations and repetitions.
Answer with the notes only."""


@dataclass
class NotesUpdate:
    changes: FactChanges
    body: NotesBody
    facts: list[Fact]
    rendered: str | None = None  # None: the previous notes stay in the prompt
    tokens: int | None = None
    needs_rebuild: bool = False
    source: NotesSource | None = None
    rejected: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # constraints the cap left out
    error: str | None = None
    proposals: ProposalCheck = field(default_factory=ProposalCheck)

    def text(self, previous: str | None) -> str | None:
        return self.rendered if self.rendered is not None else previous

    def summary(self, previous_text: str | None, previous_tokens: int) -> NotesSummary:
        """What the turn answers about C2: the notes now in the prompt and what changed."""
        return NotesSummary(
            text=self.text(previous_text),
            tokens=self.tokens if self.tokens is not None else previous_tokens,
            updated=self.rendered is not None,
            source=self.source,
            rejected_constraints=tuple(self.rejected),
            missing_constraints=tuple(self.missing),
            error=self.error,
            needs_rebuild=self.needs_rebuild,
            facts=active_facts_view(self.facts),
            proposed_kept=len(self.proposals.kept),
            proposed_dropped=len(self.proposals.dropped),
        )


def _sources(plan: TurnPlan) -> list[SourceMessage]:
    return [
        SourceMessage(m.seq, m.turn, m.message.role, m.message.words, m.created_at)
        for m in (*plan.recorded, *plan.new_messages)
        if m.message.words and m.message.role in ("user", "assistant") and m.stub_chunk_id is None
    ]


async def _llm_notes(
    ctx: ServiceContext, draft: str, facts: list[Fact], cap: int
) -> tuple[str | None, list[str], str | None]:
    """The model's notes if they keep every constraint and `cap`, else None with the
    reasons."""
    if ctx.chat_model is None:
        return None, [], None
    try:
        text = await asyncio.wait_for(
            ctx.chat_model.complete(NOTES_RULES.format(cap=cap), draft),
            timeout=ctx.settings.llm.timeout_s,
        )
    except (ChatModelUnavailable, TimeoutError) as error:
        return None, [], f"chat model unavailable: {error}"
    kept = ctx.settings.notes.min_content_kept
    lost = [fact.text for fact in weakened(text, facts, min_content_kept=kept)]
    if lost:
        return None, lost, None
    if ctx.counter.count(text) > cap:
        return None, [], "chat model notes over the cap"
    return text.strip(), [], None


async def update_notes(
    ctx: ServiceContext, snap: Snapshot, plan: TurnPlan, drafted: NotesDraft | None = None
) -> NotesUpdate:
    """The turn's notes: facts and body from its messages (`drafted`: extracted already while
    planning), rendered when the window changes or they first have something to say."""
    try:
        return await _update(ctx, snap, plan, drafted)
    except Exception as error:  # notes must never fail the turn (docs/DESIGN.md §5)
        return NotesUpdate(
            changes=FactChanges(),
            body=snap.notes_body,
            facts=list(snap.facts),
            needs_rebuild=True,
            error=f"{type(error).__name__}: {error}",
        )


async def proposed_facts(ctx: ServiceContext, sources: Sequence[SourceMessage]) -> ProposalCheck:
    """The stated facts the chat model proposes for the turn's user messages, checked against
    them (app/core/proposed.py); nothing without a model, or when it fails or times out: the
    rules' facts stand alone."""
    said = [s for s in sources if s.role == "user"][-ctx.settings.llm.propose_max_messages :]
    if ctx.chat_model is None or not ctx.settings.llm.propose_facts or not said:
        return ProposalCheck()
    try:
        answer = await asyncio.wait_for(
            ctx.chat_model.complete(PROPOSE_RULES, proposal_prompt(said)),
            timeout=ctx.settings.llm.timeout_s,
        )
    except Exception:  # a model's failure, or its adapter's, never costs the rules' facts
        return ProposalCheck()
    return check_proposals(parse_proposals(answer), said)


def waits_on_chat_model(ctx: ServiceContext, snap: Snapshot, plan: TurnPlan) -> bool:
    """Whether the turn's notes update calls the chat model: for the facts of new user words,
    or for the notes rendered at an offload or a rebuild."""
    if ctx.chat_model is None:
        return False
    if ctx.settings.llm.propose_facts and any(s.role == "user" for s in _sources(plan)):
        return True
    return plan.offloaded or snap.notes_needs_rebuild


def _extracted(
    ctx: ServiceContext,
    snap: Snapshot,
    plan: TurnPlan,
    proposals: ProposalCheck | None = None,
) -> NotesUpdate:
    """The turn's fact changes and body, nothing rendered yet. What the notes hold depends
    on this turn's messages only, never on which of the window's messages the plan offloads."""
    sources = _sources(plan)
    notes = ctx.settings.notes
    proposals = proposals or ProposalCheck()
    changes = extract(
        sources,
        snap.facts,
        notes.max_active_per_kind,
        notes.merge_similarity,
        snap.carried,
        proposals.by_message(),
    )
    body = update_body(snap.notes_body, sources, notes_limits(ctx.settings))
    facts = apply(snap.facts, changes)
    return NotesUpdate(changes=changes, body=body, facts=facts, proposals=proposals)


def _draft(ctx: ServiceContext, update: NotesUpdate, cap: int) -> str:
    limits = notes_limits(ctx.settings)
    return render(update.body, update.facts, cap_tokens=cap, count=ctx.counter.count, limits=limits)


@dataclass(frozen=True)
class NotesDraft:
    """What the notes an offload renders will take (`tokens`), and the extraction that
    drafted them, which the turn's notes update then uses instead of extracting again."""

    tokens: int
    extracted: NotesUpdate


def drafted_notes(ctx: ServiceContext, snap: Snapshot, plan: TurnPlan) -> NotesDraft | None:
    """The extractive draft's block at the window's cap (None with a chat model configured,
    whose notes may take up to the cap)."""
    if ctx.chat_model is not None:
        return None
    try:
        update = _extracted(ctx, snap, plan)
        cap = text_cap(ctx, window_notes_cap(plan_policy(ctx.settings), plan.config.budget))
        return NotesDraft(
            count_text_block(ctx.counter, notes_block(_draft(ctx, update, cap))), update
        )
    except Exception:  # never fails the turn: the batch makes room at the cap instead
        return None


async def _update(
    ctx: ServiceContext, snap: Snapshot, plan: TurnPlan, drafted: NotesDraft | None
) -> NotesUpdate:
    # The draft's extraction holds for any plan of the same messages: the notes depend on
    # the turn's messages only, and it was made without proposals, as this one would be.
    proposals = await proposed_facts(ctx, _sources(plan))
    if drafted is not None and not proposals.kept and not proposals.dropped:
        update = drafted.extracted
    else:
        update = await ctx.throttle.run(_extracted, ctx, snap, plan, proposals)
    facts, limits = update.facts, notes_limits(ctx.settings)
    if not (
        plan.offloaded
        or snap.notes_needs_rebuild
        or _names_archived_option(update.changes, plan)
        or _first_content(snap, update)
    ):
        return update
    cap = text_cap(ctx, plan.notes_cap)
    draft = await ctx.throttle.run(_draft, ctx, update, cap)
    llm_text, update.rejected, update.error = await _llm_notes(ctx, draft, facts, cap)
    update.rendered = llm_text if llm_text is not None else draft
    update.source = "llm" if llm_text is not None else "extractive"
    update.tokens = count_text_block(ctx.counter, notes_block(update.rendered))
    # The check runs on every update: only the cap can make the extractive notes fail it.
    missing = weakened(update.rendered, facts, min_content_kept=limits.min_content_kept)
    update.missing = [fact.text for fact in missing]
    return update


def _first_content(snap: Snapshot, update: NotesUpdate) -> bool:
    """The notes have never been in the prompt and now have something to say: they are
    rendered from this turn on (then again at offloads), not first at the first offload."""
    body = update.body
    has_content = bool(body.goal or body.open or body.done) or any(
        f.status is FactStatus.ACTIVE for f in update.facts
    )
    return not snap.notes_text and has_content


def _names_archived_option(changes: FactChanges, plan: TurnPlan) -> bool:
    in_window = {m.seq for m in plan.window_after}
    return any(seq not in in_window for seq in changes.options_named)


# Tokens the header's join with the text may add beyond counting the two apart.
JOIN_MARGIN_TOKENS = 2


def text_cap(ctx: ServiceContext, block_cap: int) -> int:
    """The notes text's cap when its whole block (header and message framing) may take
    `block_cap` tokens."""
    framing = count_text_block(ctx.counter, notes_block("-")) - ctx.counter.count("-")
    return max(0, block_cap - framing - JOIN_MARGIN_TOKENS)


def active_facts_view(facts: Sequence[Fact]) -> tuple[ActiveFact, ...]:
    return tuple(
        ActiveFact(
            f.id,
            f.kind,
            f.text,
            f.source_turn,
            f.source_seq,
            f.role,
            f.subject,
            f.value,
            f.carried.session_id if f.carried else None,
            f.carried.fact_id if f.carried else None,
        )
        for f in facts
        if f.status is FactStatus.ACTIVE
    )
