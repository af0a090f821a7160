"""The settings as the policy values `app/core` takes: core never reads `Settings` itself,
so every number it uses is visible at the call and a unit test can pass its own."""

from __future__ import annotations

from app.core.budget import Policy
from app.core.chunker import TopicPolicy, UnitPolicy
from app.core.notes import NotesLimits
from app.core.plan import POLICY_FIELDS, Calibration, PlanPolicy, StubShape
from app.core.rerank import ItemShape
from app.settings import Settings


def plan_policy(settings: Settings) -> PlanPolicy:
    budget = settings.budget
    return PlanPolicy(
        default_model=settings.default_model,
        policy=Policy(**{name: getattr(budget, name) for name in POLICY_FIELDS}),
        reserve_tokens=budget.reserve_tokens,
        reserve_max_fraction=budget.reserve_max_fraction,
        oversize_fraction=budget.oversize_fraction,
        oversize_max_tokens=budget.oversize_max_tokens,
        stub=StubShape(budget.stub_head_lines, budget.stub_tail_lines, budget.stub_line_chars),
        calibration=Calibration(
            budget.calibration_alpha, budget.calibration_min, budget.calibration_max
        ),
        units=unit_policy(settings),
        recall_share=budget.recall_share,
        notes_cap_tokens=settings.notes.cap_tokens,
        notes_max_share=settings.notes.max_share,
    )


def notes_limits(settings: Settings) -> NotesLimits:
    notes = settings.notes
    return NotesLimits(
        max_done=notes.max_done,
        max_open=notes.max_open,
        max_decisions=notes.max_decisions,
        max_key_facts=notes.max_key_facts,
        min_shared_for_done=notes.min_shared_for_done,
        min_content_kept=notes.min_content_kept,
        merge_similarity=notes.merge_similarity,
    )


def item_shape(settings: Settings) -> ItemShape:
    recall = settings.recall
    return ItemShape(recall.min_item_text_tokens, recall.item_margin_tokens)


def unit_policy(settings: Settings) -> UnitPolicy:
    chunks = settings.chunks
    return UnitPolicy(max_tokens=chunks.unit_max_tokens, max_units=chunks.max_units_per_chunk)


def topic_policy(settings: Settings) -> TopicPolicy:
    chunks = settings.chunks
    return TopicPolicy(
        min_tokens=chunks.min_tokens,
        max_tokens=chunks.max_tokens,
        similarity=chunks.topic_similarity,
        overlap=chunks.overlap,
        units=unit_policy(settings),
    )
