"""The recall outcome a turn is counted under in /metrics (app.metrics.recall_outcome)."""

from dataclasses import replace
from datetime import UTC, datetime

from app.core.results import RecalledChunk, TurnRecallSummary
from app.metrics import recall_outcome

SEARCHED = TurnRecallSummary(
    mode="auto",
    query_raw="which port?",
    query_rewritten="which port?",
    hits=(),
    injected_tokens=0,
    no_match=False,
    skipped_reason=None,
    fallback=None,
)
CHUNK = RecalledChunk(
    chunk_id="ck_1",
    score=0.5,
    confidence=0.4,
    vector_score=0.8,
    lexical_score=None,
    turn_range=(1, 2),
    ts=datetime(2026, 1, 1, tzinfo=UTC),
    tokens=40,
    truncated=False,
)


def test_evidence_is_a_hit_and_pointers_alone_are_counted_apart_from_a_miss() -> None:
    assert recall_outcome(replace(SEARCHED, hits=(CHUNK,), pointers=(CHUNK,))) == "hit"
    assert recall_outcome(replace(SEARCHED, pointers=(CHUNK,))) == "pointed"
    assert recall_outcome(SEARCHED) == "miss"


def test_a_degraded_search_and_a_skip_are_named_before_what_they_found() -> None:
    assert recall_outcome(replace(SEARCHED, fallback="embedder_down", hits=(CHUNK,))) == "fallback"
    assert recall_outcome(replace(SEARCHED, skipped_reason="already_in_context")) == "skipped"
