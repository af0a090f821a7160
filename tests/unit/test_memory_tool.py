"""The memory tool's pure parts: types by scope, model-facing text, what forget drags along."""

from __future__ import annotations

from app.core import memory_tool as tool
from app.core.forget import Forgotten, body_without, derived_fact, scrubbed_payload
from app.core.memory_tool import MemoryType
from app.core.notes import NotesBody

SECRET = "user: the code is 7731\n\nassistant: noted"
FORGOTTEN = Forgotten(texts=[SECRET], seqs={3, 4}, turns={2})


def test_admin_may_call_every_type_and_no_scope_none() -> None:
    assert tool.enabled_types({"admin"}) == list(MemoryType)
    assert tool.enabled_types(set()) == []


def test_texts_for_the_model() -> None:
    assert tool.offload_text({"scheduled": False}).startswith("nothing scheduled")
    assert "already stored" in tool.remember_text({"duplicate": True, "chunk_id": "ck_1"})
    assert tool.remember_text({"duplicate": False, "chunk_id": "ck_1", "facts": []}) == (
        "stored as ck_1"
    )
    status = {"turns": 0, "counts": {"window_messages": 0, "offloaded_messages": 0, "chunks": 0}}
    assert "window unknown" in tool.status_text(status)
    deleted = {"status": "deleted", "chunks_deleted": 2, "chunk_ids": ["ck_1", "ck_2"]}
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
