"""Replays of a constraint, a reference and a pending action, in Chinese and English, each
across three forced offloads, through the real turn pipeline and Postgres."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.messages import Message
from app.core.proposed import PROPOSE_RULES
from app.core.results import TurnResult
from app.providers.fakes import (
    BrokenChatModel,
    EchoChatModel,
    ScriptedChatModel,
    WeakeningChatModel,
)
from app.services.context import ServiceContext
from app.services.turns import run_turn
from app.store import statements
from tests.builders import assistant, user, words
from tests.conftest import make_settings
from tests.integration.test_turn_invariants import turn_input

WINDOW = {"context_window": 3000, "policy": {"floor_turns": 2, "floor_tokens": 0}}
SCRIPTS = {
    "zh": {
        "constraints": "帮我整理库存报表。只查华东仓，只看缺货商品。",
        "kept": ["只查华东仓", "只看缺货商品"],
        "change": "改成华南仓",
        "changed": "改成华南仓（取代：只查华东仓）",
        "options": "方案一：按天统计；方案二：按月汇总；方案三：实时看板",
        "pick": "把第二个方案改成按周统计",
        "picked_content": "按月汇总",
        "pending": "数据整理好以后，等我确认后再导出 CSV。",
        "pending_text": "数据整理好以后，等我确认后再导出 CSV",
        "confirm": "确认了，可以导出",
    },
    "en": {
        "constraints": "Please prepare the stock report. Only check the East-China warehouse, "
        "and only show out-of-stock items.",
        "kept": ["Only check the East-China warehouse", "and only show out-of-stock items"],
        "change": "Change the warehouse to the South-China one instead.",
        "changed": "Change the warehouse to the South-China one instead (replaces: Only check "
        "the East-China warehouse)",
        "options": "Three proposals:\n1. Daily statistics\n2. Monthly summary\n3. Live dashboard",
        "pick": "Change the second one to weekly statistics.",
        "picked_content": "Monthly summary",
        "pending": "When the data is ready, wait for my confirmation, then export the CSV.",
        "pending_text": "When the data is ready, wait for my confirmation, then export the CSV",
        "confirm": "Confirmed, go ahead and export it.",
    },
}


async def post(ctx: ServiceContext, session: str, *messages: Message) -> TurnResult:
    return await run_turn(ctx, turn_input(session, list(messages), **WINDOW))


async def through_offloads(ctx: ServiceContext, session: str, count: int = 3) -> TurnResult:
    """Small talk until `count` offloads have happened; the last response."""
    seen = 0
    for t in range(200):
        response = await post(
            ctx,
            session,
            assistant(f"reply {t} " + words(60, "r")),
            user(f"chat {t} " + words(90, "c")),
        )
        seen += response.offload.triggered
        if seen >= count:
            return response
    raise AssertionError("the offloads never happened")


def notes_of(response: TurnResult) -> str:
    return str(response.notes.text or "")


def facts_of(response: TurnResult) -> list[str]:
    return [f.text for f in response.notes.facts]


def window_text(response: TurnResult) -> str:
    return "\n".join(str(m.get("content")) for m in response.messages if m["role"] != "system")


@pytest.mark.parametrize("lang", ["zh", "en"])
async def test_constraints_survive_offloads_and_a_change_supersedes_only_its_own(
    ctx: ServiceContext, lang: str
) -> None:
    script = SCRIPTS[lang]
    await post(ctx, f"c-{lang}", user(script["constraints"]))
    response = await through_offloads(ctx, f"c-{lang}")
    assert response.notes.missing_constraints == ()
    for constraint in script["kept"]:
        assert constraint in notes_of(response) and constraint in facts_of(response)
        assert constraint not in window_text(response)  # only the notes carry it now
    changed = await post(ctx, f"c-{lang}", user(script["change"]))
    assert facts_of(changed) == [script["kept"][1], script["changed"]] or set(
        facts_of(changed)
    ) >= {script["kept"][1], script["changed"]}
    assert script["kept"][0] not in facts_of(changed)
    response = await through_offloads(ctx, f"c-{lang}")
    notes = notes_of(response)
    assert script["changed"] in notes and script["kept"][1] in notes
    assert f"- {script['kept'][0]} (turn" not in notes


@pytest.mark.parametrize("lang", ["zh", "en"])
async def test_a_decision_about_the_second_proposal_names_it_after_offloads(
    ctx: ServiceContext, lang: str
) -> None:
    script = SCRIPTS[lang]
    await post(ctx, f"r-{lang}", user("?"), assistant(script["options"]), user("ok"))
    await through_offloads(ctx, f"r-{lang}")
    picked = await post(ctx, f"r-{lang}", user(script["pick"]))
    decision = next(f for f in picked.notes.facts if f.kind == "decision")
    assert script["picked_content"] in decision.text
    # The list has left the window: the notes render now, so the prompt names the option.
    assert picked.notes.updated and not picked.offload.triggered
    assert script["picked_content"] in notes_of(picked)
    response = await through_offloads(ctx, f"r-{lang}")
    assert script["picked_content"] in notes_of(response)
    assert script["options"].splitlines()[0] not in window_text(response)


async def test_a_decision_about_an_option_still_in_the_window_leaves_the_notes_alone(
    ctx: ServiceContext,
) -> None:
    script = SCRIPTS["en"]
    await post(ctx, "r-near", user(script["constraints"]))
    await through_offloads(ctx, "r-near", count=1)
    listed = await post(ctx, "r-near", user("?"), assistant(script["options"]))
    picked = await post(ctx, "r-near", user(script["pick"]))
    assert not picked.offload.triggered and not picked.notes.updated
    assert picked.notes.text == listed.notes.text  # the prompt's prefix is unchanged
    assert script["picked_content"] in window_text(picked)


@pytest.mark.parametrize("lang", ["zh", "en"])
async def test_a_pending_action_stays_open_until_a_confirming_turn(
    ctx: ServiceContext, lang: str
) -> None:
    script = SCRIPTS[lang]
    await post(ctx, f"p-{lang}", user(script["pending"]))
    response = await through_offloads(ctx, f"p-{lang}")
    assert f"PENDING: {script['pending_text']}" in notes_of(response)
    await post(ctx, f"p-{lang}", user(script["confirm"]))
    response = await through_offloads(ctx, f"p-{lang}")
    assert "PENDING:" not in notes_of(response)
    assert f"confirmed: {script['pending_text']}" in notes_of(response)


async def test_chat_model_notes_are_used_when_they_keep_every_constraint(
    ctx: ServiceContext,
) -> None:
    model = EchoChatModel()
    ctx.chat_model = model
    await post(ctx, "llm-ok", user(SCRIPTS["en"]["constraints"]))
    response = await through_offloads(ctx, "llm-ok", count=1)
    assert model.calls >= 1
    assert response.notes.source == "llm" and response.notes.rejected_constraints == ()


async def test_chat_model_notes_that_weaken_a_constraint_are_rejected(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    ctx.chat_model = WeakeningChatModel()
    await post(ctx, "llm-weak", user(SCRIPTS["zh"]["constraints"]))
    response = await through_offloads(ctx, "llm-weak", count=1)
    notes = response.notes
    assert notes.source == "extractive"
    assert set(notes.rejected_constraints) == set(SCRIPTS["zh"]["kept"])
    assert "只查华东仓" in notes.text and "优先" not in notes.text
    recorded = await connection.scalar(
        text(
            "SELECT payload->'notes'->'rejected_constraints' FROM events "
            "WHERE session_id = 'local/llm-weak' AND payload->'notes'->>'source' = 'extractive' "
            "ORDER BY id DESC LIMIT 1"
        )
    )
    assert set(recorded) == set(SCRIPTS["zh"]["kept"])


async def test_a_failing_notes_update_keeps_the_previous_notes_and_rebuilds_next_turn(
    ctx: ServiceContext,
) -> None:
    await post(ctx, "broken", user(SCRIPTS["en"]["constraints"]))
    before = await through_offloads(ctx, "broken", count=1)
    ctx.chat_model = BrokenChatModel()
    failed = await through_offloads(ctx, "broken", count=1)
    assert failed.notes.error and failed.notes.needs_rebuild is True
    assert failed.notes.text == before.notes.text
    ctx.chat_model = None
    rebuilt = await post(ctx, "broken", user("next"))
    assert rebuilt.offload.triggered is False
    assert rebuilt.notes.updated is True and rebuilt.notes.needs_rebuild is False
    assert SCRIPTS["en"]["kept"][0] in notes_of(rebuilt)


async def test_constraints_the_cap_leaves_out_are_reported_and_stay_in_the_facts(
    ctx: ServiceContext,
) -> None:
    ctx.settings = make_settings(notes={"cap_tokens": 60})
    rules = [f"Only use supplier number {i} for region {i}." for i in range(8)]
    await post(ctx, "capped", user(" ".join(rules)))
    response = await through_offloads(ctx, "capped", count=1)
    notes = response.notes
    assert ctx.counter.count(notes.text) <= 60
    assert notes.missing_constraints
    assert set(notes.missing_constraints) <= set(facts_of(response))


BROKER = (
    "Our broker this time is a small firm called brightline customs, they quoted 2.4k for the "
    "clearance. The order is PO-88213."
)


def proposing(*items: dict[str, object]) -> ScriptedChatModel:
    """A chat model that proposes `items` for the facts prompt and echoes notes drafts."""

    def reply(system: str, user: str) -> str:
        if system == PROPOSE_RULES:
            return json.dumps({"facts": list(items)})
        return user

    return ScriptedChatModel(reply)


def proposal(kind: str, value: str, words: str, subject: str = "") -> dict[str, object]:
    return {"message": 1, "kind": kind, "subject": subject, "value": value, "words": words}


async def test_a_chat_models_proposed_facts_join_the_rules_when_their_message_says_them(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    ctx.chat_model = proposing(
        proposal("party", "brightline customs", "called brightline customs", "broker"),
        proposal("amount", "2400 EUR", "they quoted 2.4k", "clearance quote"),
        proposal("identifier", "PO-88213", "The order is PO-88213", "order"),  # the rules' too
        proposal("party", "Morgan Ellery", "Our broker this time", "broker"),  # never said
    )
    response = await post(ctx, "proposed", user(BROKER))
    facts = {(f.kind, f.value) for f in response.notes.facts}
    assert facts == {
        ("party", "brightline customs"),
        ("amount", "2400 EUR"),
        ("identifier", "PO-88213"),
    }
    assert (response.notes.proposed_kept, response.notes.proposed_dropped) == (3, 1)
    assert "brightline customs" in notes_of(response)
    recorded = await connection.scalar(
        text(
            "SELECT payload->'facts' FROM events WHERE session_id = 'local/proposed' "
            "ORDER BY id DESC LIMIT 1"
        )
    )
    assert (recorded["proposed_kept"], recorded["proposed_dropped"]) == (3, 1)


async def test_without_the_model_the_rules_facts_stand_alone(ctx: ServiceContext) -> None:
    ctx.chat_model = ScriptedChatModel(lambda system, user: None)  # the model is down
    down = await post(ctx, "proposed-down", user(BROKER))
    ctx.chat_model = proposing(proposal("party", "brightline customs", "brightline customs"))
    ctx.settings = make_settings(llm={"propose_facts": False})
    switched_off = await post(ctx, "proposed-off", user(BROKER))
    for response in (down, switched_off):
        assert [(f.kind, f.value) for f in response.notes.facts] == [("identifier", "PO-88213")]
        assert (response.notes.proposed_kept, response.notes.proposed_dropped) == (0, 0)


async def test_a_turn_that_asks_the_chat_model_for_facts_lets_the_lock_go_while_it_waits(
    ctx: ServiceContext,
) -> None:
    """Like a recall search, the model's call happens between two transactions, never under
    the session's row lock (a quiet turn without a model is one transaction)."""
    await post(ctx, "held", user("hello"))
    ctx.chat_model = proposing(proposal("party", "brightline customs", "brightline customs"))
    with statements.counting() as sent:
        response = await post(ctx, "held", user(BROKER))
    assert response.recall.skipped_reason == "archive_empty"
    assert sent.transactions == 2  # the locked read, then the write that locks again
    assert ("party", "brightline customs") in {(f.kind, f.value) for f in response.notes.facts}


async def test_a_whole_history_at_once_shows_the_model_only_its_newest_user_messages(
    ctx: ServiceContext,
) -> None:
    model = proposing()
    ctx.chat_model = model
    ctx.settings = make_settings(llm={"propose_max_messages": 2})
    said = [user(f"Note {n}: the order is PO-{88210 + n}.") for n in range(5)]
    response = await post(ctx, "many", *said)
    (prompt,) = [u for s, u in model.prompts if s == PROPOSE_RULES]
    assert "PO-88213" in prompt and "PO-88214" in prompt and "PO-88212" not in prompt
    assert ("identifier", "PO-88214") in {(f.kind, f.value) for f in response.notes.facts}
