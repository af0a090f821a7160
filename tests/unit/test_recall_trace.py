"""Why each candidate was or was not injected, and the four failure classes of a detail."""

from __future__ import annotations

from datetime import timedelta

from app.core.dates import Period
from app.core.inspection import Lines, notes_absence, recall_detail, timeline_point
from app.core.recall_trace import (
    CandidateOutcome,
    CandidateTrace,
    DetailClass,
    RecallDecisions,
    StoredChunkAt,
    TurnRecallTrace,
    locate,
    trace_candidates,
)
from app.core.rerank import ScoredHit
from tests.builders import T0
from tests.unit.test_rerank import make_candidate


def hit(chunk_id: str, score: float, **overrides: object) -> ScoredHit:
    return ScoredHit(make_candidate(chunk_id, **overrides), score, 0, margin=score - 0.1)


def decide(evidence: list[ScoredHit], **overrides: object) -> RecallDecisions:
    values: dict[str, object] = {
        "evidence": evidence,
        "injected": set(),
        "held": set(),
        "window_seqs": set(),
        "top_k": 2,
    }
    values.update(overrides)
    return RecallDecisions(**values)  # type: ignore[arg-type]


def outcomes(traces: tuple[CandidateTrace, ...]) -> dict[str, CandidateOutcome]:
    return {t.chunk_id: t.outcome for t in traces}


def test_each_candidate_gets_the_reason_it_did_or_did_not_reach_the_prompt() -> None:
    a, b, c, d, e = (hit(i, 0.9 - n / 10) for n, i in enumerate("abcde"))
    held = hit("h", 0.95)
    windowed = hit("w", 0.85, seq_start=7, seq_end=8)
    fused = [held, a, windowed, b, c, d, e]
    # evidence in the reranker's order: c before b; d and e are below the floors
    decisions = decide([a, windowed, c, b], injected={"a"}, held={"h"}, window_seqs={7, 8}, top_k=2)
    found = outcomes(trace_candidates(fused, decisions, limit=10))
    assert found == {
        "h": CandidateOutcome.HELD,
        "a": CandidateOutcome.INJECTED,
        "w": CandidateOutcome.IN_WINDOW,
        "c": CandidateOutcome.NO_ROOM,  # second eligible within k = 2: the budget stopped it
        "b": CandidateOutcome.BEYOND_TOP_K,  # third eligible
        "d": CandidateOutcome.NOT_EVIDENCE,
        "e": CandidateOutcome.NOT_EVIDENCE,
    }


def test_a_candidate_said_on_another_day_than_the_question_names_is_off_the_day() -> None:
    day = Period(T0, T0 + timedelta(days=1))
    that_day = hit("same", 0.9, first_ts=T0 + timedelta(hours=2))
    other_day = hit("other", 0.8, first_ts=T0 - timedelta(days=3))
    found = outcomes(
        trace_candidates([that_day, other_day], decide([], period=day, top_k=5), limit=5)
    )
    assert found == {
        "same": CandidateOutcome.NOT_EVIDENCE,
        "other": CandidateOutcome.OFF_THE_DAY,
    }


def test_no_candidate_is_off_a_day_nothing_was_said_on() -> None:
    day = Period(T0 + timedelta(days=9), T0 + timedelta(days=10))
    earlier = hit("earlier", 0.9, first_ts=T0)
    found = outcomes(trace_candidates([earlier], decide([], period=day, top_k=5), limit=5))
    assert found == {"earlier": CandidateOutcome.NOT_EVIDENCE}  # judged, not filtered out


def test_the_trace_keeps_the_best_candidates_and_every_injected_one() -> None:
    fused = [hit(f"c{i}", 1 - i / 100) for i in range(30)]
    traces = trace_candidates(fused, decide([fused[25]], injected={"c25"}), limit=3)
    assert [t.chunk_id for t in traces] == ["c0", "c1", "c2", "c25"]
    injected = traces[-1]
    assert injected.outcome is CandidateOutcome.INJECTED
    assert injected.fused_score == 0.75 and injected.margin == 0.65
    assert injected.turn_range == (1, 2) and injected.vector_score is None


def trace_at(turn: int, **overrides: object) -> TurnRecallTrace:
    values: dict[str, object] = {
        "turn": turn,
        "at": T0 + timedelta(minutes=turn),
        "candidates": (),
        "injected": set(),
        "held": set(),
    }
    values.update(overrides)
    return TurnRecallTrace(**values)  # type: ignore[arg-type]


def chunk_at(
    chunk_id: str, archived_turn: int, turns: tuple[int, int] = (1, 2), **overrides: object
) -> StoredChunkAt:
    values: dict[str, object] = {
        "chunk_id": chunk_id,
        "turn_range": turns,
        "created_at": T0,
        "archived_turn": archived_turn,
    }
    values.update(overrides)
    return StoredChunkAt(**values)  # type: ignore[arg-type]


def candidate(chunk_id: str, outcome: CandidateOutcome) -> CandidateTrace:
    return CandidateTrace(chunk_id, (1, 2), 0.5, 0.5, 0.2, 0.5, 0.01, outcome)


def test_a_detail_nobody_stored_is_not_stored() -> None:
    verdict, places = locate([], [], trace_at(9))
    assert verdict is DetailClass.NOT_STORED and places == ()


def test_a_detail_said_after_the_turn_was_not_stored_then() -> None:
    verdict, _ = locate([(30, 12)], [chunk_at("late", 15, turns=(11, 12))], trace_at(9))
    assert verdict is DetailClass.NOT_STORED


def test_a_detail_in_the_window_is_in_the_prompt() -> None:
    verdict, places = locate([(4, 2)], [], trace_at(9))
    assert verdict is DetailClass.IN_PROMPT
    assert (places[0].where, places[0].ref, places[0].reason) == ("window", "4", "in the window")


def test_a_chunk_archived_after_the_turn_was_still_in_its_window() -> None:
    verdict, places = locate([], [chunk_at("later", 12)], trace_at(9))
    assert verdict is DetailClass.IN_PROMPT and places[0].reason == "in the window then"
    # the offloading turn itself already had it in its archive
    assert locate([], [chunk_at("now", 9)], trace_at(9))[0] is DetailClass.NOT_FOUND


def test_a_chunk_from_before_archived_turns_were_recorded_goes_by_its_write_time() -> None:
    written_later = chunk_at("old", None, created_at=T0 + timedelta(minutes=12))
    assert locate([], [written_later], trace_at(9))[1][0].reason == "in the window then"
    written_before = chunk_at("old", None, created_at=T0 + timedelta(minutes=5))
    assert locate([], [written_before], trace_at(9))[0] is DetailClass.NOT_FOUND


def test_a_point_remembered_after_the_turn_was_not_stored_then() -> None:
    remembered = chunk_at("note", 10, turns=(9, 9), from_window=False)
    assert locate([], [remembered], trace_at(9))[0] is DetailClass.NOT_STORED
    assert locate([], [remembered], trace_at(10))[0] is DetailClass.NOT_FOUND


def test_an_archived_chunk_the_search_missed_is_not_found() -> None:
    turn = trace_at(9, skipped_reason="acknowledgement")
    verdict, places = locate([], [chunk_at("old", 5)], turn)
    assert verdict is DetailClass.NOT_FOUND
    assert places[0].reason == "not among the candidates (recall: acknowledgement)"
    _, searched = locate([], [chunk_at("old", 5)], trace_at(9))
    assert searched[0].reason == "not among the candidates"


def test_a_candidate_that_was_not_injected_is_found_but_not_in_the_top_k() -> None:
    turn = trace_at(9, candidates=[candidate("old", CandidateOutcome.NOT_EVIDENCE)])
    verdict, places = locate([], [chunk_at("old", 5)], turn)
    assert verdict is DetailClass.NOT_IN_TOP_K and places[0].reason == "not_evidence"


def test_a_candidate_left_out_as_a_repeat_was_already_in_the_prompt() -> None:
    turn = trace_at(9, candidates=[candidate("old", CandidateOutcome.REPEATED)])
    verdict, places = locate([], [chunk_at("old", 5)], turn)
    assert verdict is DetailClass.IN_PROMPT and places[0].reason == "already in the prompt"


def test_a_recalled_or_held_chunk_is_in_the_prompt_and_the_best_place_wins() -> None:
    injected = trace_at(9, injected={"a"})
    assert locate([], [chunk_at("a", 5)], injected)[1][0].reason == "recalled this turn"
    held = trace_at(9, held={"a"})
    assert locate([], [chunk_at("a", 5)], held)[1][0].reason == "in a held block"
    both = locate([], [chunk_at("missed", 5), chunk_at("a", 6)], injected)
    assert both[0] is DetailClass.IN_PROMPT and len(both[1]) == 2


# --- reading a turn's event back -------------------------------------------------------------

LINES = Lines(budget=1000, watermark_base=850, offload_ratio=0.8, emergency_ratio=0.95)


def test_an_offloading_turn_reads_back_as_a_point_with_its_marker() -> None:
    payload = {
        "prompt_tokens": 812,
        "budget": 900,
        "watermark_base": 760,
        "offload_ratio": 0.7,
        "emergency_ratio": 0.9,
        "level": "offload",
        "offload": {
            "triggered": True,
            "tokens_freed": 300,
            "chunk_ids": ["ck_1", "ck_2"],
            "turn_range": [1, 4],
            "floor_yielded": False,
        },
        "recall": {"injected_tokens": 120},
    }
    point = timeline_point(7, T0, payload, LINES)
    assert (point.turn, point.prompt_tokens, point.injected_tokens, point.budget) == (
        7,
        812,
        120,
        900,
    )
    assert point.watermark_base == 760
    assert (point.offload_ratio, point.emergency_ratio, point.level) == (0.7, 0.9, "offload")
    assert point.offload is not None
    assert point.offload.chunk_ids == ("ck_1", "ck_2") and point.offload.turn_range == (1, 4)
    assert point.offload.tokens_freed == 300


def test_an_event_written_before_the_budget_was_recorded_takes_the_sessions_lines() -> None:
    point = timeline_point(3, T0, {"prompt_tokens": 40, "offload": {"triggered": False}}, LINES)
    assert (point.budget, point.offload_ratio, point.emergency_ratio) == (1000, 0.8, 0.95)
    assert point.watermark_base == 850
    assert point.offload is None and point.injected_tokens == 0 and point.level == "normal"
    odd = timeline_point(4, T0, {"offload": {"triggered": True, "turn_range": None}}, LINES)
    assert odd.offload is not None and odd.offload.turn_range is None


def test_an_event_from_before_the_base_was_named_draws_its_budget_as_the_base() -> None:
    # Such events recorded C − r − R as "budget"; the session's C − r is drawn above it.
    point = timeline_point(5, T0, {"prompt_tokens": 700, "budget": 800}, LINES)
    assert (point.budget, point.watermark_base) == (1000, 800)


def test_a_turns_recall_reads_back_with_its_candidates_and_skips_what_it_cannot_read() -> None:
    good = {
        "chunk_id": "ck_1",
        "turn_range": [1, 3],
        "vector_score": 0.4,
        "similarity": 0.6,
        "lexical_score": None,
        "fused_score": 0.42,
        "margin": 0.07,
        "outcome": "injected",
    }
    payload = {
        "fallback_flag": "embedder_busy",
        "recall": {
            "query_raw": "the budget we agreed on?",
            "query_rewritten": "the budget?",
            "recall_ids": ["ck_1"],
            "held_ids": ["ck_0"],
            "injected_tokens": 90,
            "pending_chunks": 2,
            "no_match": False,
            "skipped_reason": None,
            "candidates": [good, {"chunk_id": "ck_2", "outcome": "new-kind"}, "junk"],
        },
    }
    detail = recall_detail(5, T0, payload)
    assert detail.fallback == "embedder_busy" and detail.pending_chunks == 2
    assert [c.chunk_id for c in detail.candidates] == ["ck_1"]
    assert detail.candidates[0].turn_range == (1, 3)
    trace = detail.as_trace()
    assert trace.injected == {"ck_1"} and trace.held == {"ck_0"} and trace.turn == 5
    empty = recall_detail(1, T0, {"recall": {"candidates": None}})
    assert empty.candidates == () and empty.query_raw is None and empty.injected_ids == ()


def test_the_inspector_says_why_a_session_has_no_notes() -> None:
    assert notes_absence(True, 3, 3) is None
    assert notes_absence(False, 0, 0) == "No notes yet: the session has no messages."
    said = notes_absence(False, 2, 2) or ""
    assert "none of the 2 messages from the user" in said and said.endswith("keep.")
    tools = notes_absence(False, 2, 14) or ""
    assert tools.endswith("the other 12 (tool results) the notes do not read.")
