"""The memory tool's pure parts: types by scope, model-facing text, what forget drags along."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from app.core import memory_tool as tool
from app.core.forget import Forgotten, body_without, derived_fact, scrubbed_payload
from app.core.memory_tool import MemoryCall, MemoryHelp, MemoryRecall, MemoryType
from app.core.notes import NotesBody
from app.core.results import (
    ForgetDone,
    OffloadScheduled,
    RememberResult,
    SessionCounts,
    SessionStatus,
)

SECRET = "user: the code is 7731\n\nassistant: noted"
FORGOTTEN = Forgotten(texts=[SECRET], seqs={3, 4}, turns={2})


def test_admin_may_call_every_type_and_no_scope_none() -> None:
    assert tool.enabled_types({"admin"}) == list(MemoryType)
    assert tool.enabled_types(set()) == []


def test_texts_for_the_model() -> None:
    unscheduled = OffloadScheduled(scheduled=False, until_tokens=None, prompt_tokens=0)
    assert tool.offload_text(unscheduled).startswith("nothing scheduled")
    assert "already stored" in tool.remember_text(RememberResult("ck_1", duplicate=True))
    assert tool.remember_text(RememberResult("ck_1", duplicate=False)) == "stored as ck_1"
    status = SessionStatus(
        session_id="s",
        turns=0,
        model=None,
        window=None,
        counts=SessionCounts(),
        notes=None,
        facts=(),
        last_offload=None,
    )
    assert "window unknown" in tool.status_text(status)
    deleted = ForgetDone(
        chunks_deleted=2,
        request_id="fg_1",
        chunk_ids=("ck_1", "ck_2"),
        turn_ranges=((1, 2), (3, 4)),
        tokens=10,
        facts_deleted=0,
        requested_by="development",
        confirmed_by="development",
    )
    assert tool.forget_text(deleted) == "deleted 2 chunks: ck_1, ck_2"


def test_facts_and_notes_items_taken_from_forgotten_text_go() -> None:
    assert derived_fact(FORGOTTEN, "anything", 3)
    assert derived_fact(FORGOTTEN, "the code is 7731", None)
    assert not derived_fact(FORGOTTEN, "ship from Suzhou", 9)
    body = NotesBody(
        goal="the code is 7731",
        done=[{"text": "noted", "turn": 2}, {"text": "shipped", "turn": 5}],
        open=[{"text": "the code is 7731", "turn": 2}],
    )
    kept = body_without(body, FORGOTTEN)
    assert kept.goal is None and kept.done == [{"text": "shipped", "turn": 5}] and kept.open == []
    assert body_without(NotesBody(goal="keep"), FORGOTTEN).goal == "keep"
    assert not FORGOTTEN.holds(None) and not FORGOTTEN.holds("")


def test_event_text_is_scrubbed_only_where_it_came_from_forgotten_turns_or_text() -> None:
    payload = {
        "recall": {"query_raw": "hello", "query_rewritten": "hello", "recall_ids": ["ck_1"]},
        "notes": {"rejected_constraints": ["the code is 7731", "only Suzhou"]},
    }
    in_turn = scrubbed_payload(payload, 2, FORGOTTEN)
    assert in_turn is not None and in_turn["recall"]["query_raw"] is None
    assert in_turn["recall"]["recall_ids"] == ["ck_1"]
    assert in_turn["notes"]["rejected_constraints"] == ["only Suzhou"]
    untouched = {"recall": {"query_raw": "hello"}, "notes": {"missing_constraints": []}}
    assert scrubbed_payload(untouched, 7, FORGOTTEN) is None
    assert scrubbed_payload({}, None, FORGOTTEN) is None


def test_calls_ignore_nulls_and_refuse_what_is_not_an_object() -> None:
    call = TypeAdapter(MemoryCall).validate_python(
        {"type": "recall", "query": "budget", "top_k": None, "text": None, "confirm": None}
    )
    assert call == MemoryRecall(type="recall", query="budget")
    with pytest.raises(ValidationError):
        MemoryHelp.model_validate("help")
    with pytest.raises(ValidationError):  # a field the type does not take, with a value
        MemoryHelp.model_validate({"type": "help", "query": "budget"})
