"""Facts a chat model proposes (app/core/proposed.py): its answer read, each fact checked
against the message it names (the "no new entities" rule), and the kept ones merged after the
rules' own (app/core/facts.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from app.core.facts import FactKind, SourceMessage, extract
from app.core.proposed import (
    PROPOSE_RULES,
    Proposal,
    ProposalCheck,
    check_proposals,
    parse_proposals,
    proposal_prompt,
)
from app.core.stated import Stated, StatedKind, amount_value, days_named, numbers_said

SAID_AT = datetime(2027, 2, 1, 9, 0, tzinfo=UTC)
BROKER = (
    "Our broker this time is a small firm called brightline customs, they quoted 2.4k for the "
    "clearance. The order is PO-88213."
)


def message(text: str, seq: int = 1, said_at: datetime | None = SAID_AT) -> SourceMessage:
    return SourceMessage(seq, seq, "user", text, said_at)


def item(kind: str, value: str, words: str, number: int = 1, **extra: str) -> dict[str, object]:
    return {"message": number, "kind": kind, "subject": "", "value": value, "words": words} | extra


def answer(*items: dict[str, object]) -> str:
    return json.dumps({"facts": list(items)}, ensure_ascii=False)


def kept(text: str, *items: dict[str, object], said_at: datetime | None = SAID_AT) -> list[Stated]:
    check = check_proposals(parse_proposals(answer(*items)), [message(text, said_at=said_at)])
    return [fact for _, fact in check.kept]


# ---- reading the answer --------------------------------------------------------------------


def test_the_prompt_numbers_each_message_with_its_day() -> None:
    prompt = proposal_prompt([message("first"), message("second", 2, said_at=None)])
    assert prompt == "[1] (written 2027-02-01)\nfirst\n\n[2]\nsecond"
    assert "no new" not in PROPOSE_RULES and '"facts"' in PROPOSE_RULES


def test_an_answer_in_a_code_fence_is_read() -> None:
    fenced = "```json\n" + answer(item("party", "Priya Raman", "Priya Raman")) + "\n```"
    assert parse_proposals(fenced) == [
        Proposal(1, Stated(StatedKind.PARTY, "", "Priya Raman", "Priya Raman"))
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Here are the facts: budget 48,500 EUR",  # not JSON
        "[1, 2]",  # not an object
        '{"facts": "none"}',  # not a list
    ],
)
def test_an_answer_that_is_not_a_facts_object_proposes_nothing(text: str) -> None:
    assert parse_proposals(text) == []


@pytest.mark.parametrize(
    "bad",
    [
        "a string",
        {"message": "1", "kind": "party", "value": "X", "words": "X"},  # message not a number
        {"message": 1, "kind": "mood", "value": "X", "words": "X"},  # no such kind
        {"message": 1, "kind": "party", "value": 7, "words": "X"},  # value not text
        {"message": 1, "kind": "party", "value": "X", "words": ""},  # no words
    ],
)
def test_items_that_are_not_whole_proposals_are_skipped(bad: object) -> None:
    good = item("identifier", "PO-88213", "PO-88213")
    assert len(parse_proposals(json.dumps({"facts": [bad, good]}))) == 1


# ---- the check -------------------------------------------------------------------------------


def test_facts_the_message_says_are_kept_with_their_values_normalised() -> None:
    facts = kept(
        BROKER,
        item("party", "brightline customs", "a small firm called brightline customs"),
        item("amount", "€2,400", "they quoted 2.4k for the clearance"),
        item("identifier", "PO-88213", "The order is PO-88213"),
    )
    assert [(f.kind, f.value) for f in facts] == [
        (StatedKind.PARTY, "brightline customs"),
        (StatedKind.AMOUNT, "2400 EUR"),
        (StatedKind.IDENTIFIER, "PO-88213"),
    ]


@pytest.mark.parametrize(
    ("proposed", "why"),
    [
        (item("party", "Morgan Ellery", "Our broker this time"), "a name never said"),
        (item("amount", "3125 EUR", "they quoted 2.4k"), "a number never said"),
        (item("amount", "about three grand", "they quoted 2.4k"), "not an amount"),
        (item("identifier", "PO-88213", "The order number is PO-88213"), "words not said"),
        (item("party", "brightline customs", "brightline customs", number=2), "no message 2"),
        (item("date", "2027-02-30", "2.4k"), "not a day"),
        (item("date", "2027-03-14", "they quoted 2.4k"), "a day never said"),
    ],
)
def test_facts_whose_key_words_the_message_does_not_say_are_dropped(
    proposed: dict[str, object], why: str
) -> None:
    check = check_proposals(parse_proposals(answer(proposed)), [message(BROKER)])
    assert check.kept == () and len(check.dropped) == 1, why


@pytest.mark.parametrize(
    "text",
    [
        "What if we paid Kessler Logistics 48,500 euros?",
        "Would 48,500 euros be enough for Kessler Logistics?",
        'He wrote "pay Kessler Logistics 48,500 euros" on the whiteboard.',
    ],
)
def test_a_question_a_hypothetical_or_a_quotation_states_nothing(text: str) -> None:
    assert kept(text, item("amount", "48500 EUR", "48,500 euros")) == []
    assert kept(text, item("party", "Kessler Logistics", "Kessler Logistics")) == []


def test_words_that_run_across_sentences_count_when_the_message_states_them() -> None:
    text = "The vendor is Kessler. Logistics handles the rest."
    facts = kept(text, item("party", "Kessler", "Kessler. Logistics"))
    assert [f.value for f in facts] == ["Kessler"]


def test_a_day_is_kept_when_the_rules_resolve_its_words_or_its_day_of_the_month_is_said() -> None:
    text = "Her deadline is next Tuesday, and the audit is on the 14th."
    facts = kept(
        text,
        item("date", "2027-02-09", "next Tuesday"),
        item("date", "2027-02-14", "the audit is on the 14th"),
    )
    assert [f.value for f in facts] == ["2027-02-09", "2027-02-14"]
    undated = kept(text, item("date", "2027-02-09", "next Tuesday"), said_at=None)
    assert undated == []  # without the moment it was said, "next Tuesday" is no day


def test_a_choice_may_be_said_in_other_forms_of_its_words_and_keeps_only_a_said_rejection() -> None:
    text = "We're rolling back to release 4.12.3 rather than hotfixing forward."
    facts = kept(
        text,
        item("choice", "roll back to release 4.12.3", text, rejected="hotfixing forward"),
        item("choice", "rolling back", text, rejected="a full rewrite"),
    )
    assert [(f.value, f.rejected) for f in facts] == [
        ("roll back to release 4.12.3", "hotfixing forward"),
        ("rolling back", ""),
    ]
    assert kept(text, item("choice", "switch to Kubernetes", text)) == []


# ---- merged with the rules' facts -----------------------------------------------------------


def proposed(*facts: Stated, seq: int = 1) -> dict[int, list[Stated]]:
    return ProposalCheck(tuple((seq, f) for f in facts)).by_message()


def test_a_proposal_the_rules_already_made_is_not_added_twice() -> None:
    again = Stated(StatedKind.IDENTIFIER, "order", "PO-88213", "PO-88213")
    broker = Stated(StatedKind.PARTY, "broker", "brightline customs", "brightline customs")
    new = extract([message(BROKER)], [], proposed=proposed(again, broker)).new
    assert [(f.kind, f.value) for f in new] == [
        (FactKind.IDENTIFIER, "PO-88213"),
        (FactKind.PARTY, "brightline customs"),
    ]


def test_a_proposed_fact_supersedes_an_earlier_one_of_its_subject() -> None:
    first = extract([message("The pilot budget is 48,500 euros.")], []).new[0]
    later = message("Finance now says the pilot budget can go to fifty-two grand.", 2)
    raised = Stated(StatedKind.AMOUNT, "pilot budget", "52000 EUR", "fifty-two grand")
    earlier = replace(first, id=1)
    changes = extract([later], [earlier], proposed=proposed(raised, seq=2))
    assert [f.value for f in changes.new] == ["52000 EUR"]
    assert changes.superseded == [(1, 0)]


@pytest.mark.parametrize(
    ("text", "choice", "expected"),
    [
        (
            "Rail it is, via Duisburg; trucking is out.",
            Stated(StatedKind.CHOICE, "route", "Rail", "Rail it is", "trucking"),
            "route: Rail (not: trucking)",
        ),
        (
            "走陆运吧，海运太慢。",
            Stated(StatedKind.CHOICE, "运输方式", "陆运", "走陆运吧", "海运"),
            "运输方式：陆运（不选：海运）",
        ),
        ("Rail it is.", Stated(StatedKind.CHOICE, "", "Rail", "Rail it is"), "Rail"),
    ],
)
def test_a_proposed_choice_is_a_decision_naming_what_was_not_taken(
    text: str, choice: Stated, expected: str
) -> None:
    new = extract([message(text)], [], proposed=proposed(choice)).new
    assert [(f.kind, f.text) for f in new] == [(FactKind.DECISION, expected)]


def test_a_proposed_choice_adds_nothing_where_the_rules_made_a_decision() -> None:
    text = "Let's go with option B, the rail route via Duisburg, instead of trucking."
    choice = Stated(StatedKind.CHOICE, "route", "rail route via Duisburg", text, "trucking")
    new = extract([message(text)], [], proposed=proposed(choice)).new
    assert [f.kind for f in new] == [FactKind.DECISION]
    assert "(not:" not in new[0].text


# ---- what words say --------------------------------------------------------------------------


def test_numbers_said_as_digits_words_numerals_and_with_multipliers() -> None:
    assert {48500.0, 48.5} <= numbers_said("48,500 euros, or 48.5k")
    assert {32000.0, 45000.0, 0.2} <= numbers_said("三万二千元，4.5万，千分之二")
    assert 14.0 in numbers_said("Fourteen people")


def test_amount_values_as_a_model_writes_them() -> None:
    assert amount_value("48500 EUR") == amount_value("€48,500") == "48500 EUR"
    assert amount_value("三万二千元") == "32000 CNY"
    assert amount_value("12") == "12"
    assert amount_value("a lot") is None


def test_days_named_resolve_against_the_moment_said() -> None:
    assert days_named("14 March", SAID_AT) == {"2027-03-14"}
    assert days_named("soon", SAID_AT) == set()
