from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.core.lexical import likeliest_rare
from app.core.rewrite import (
    content_terms,
    embedding_focus,
    extract_entities,
    has_reference,
    is_acknowledgement,
    rewrite,
    with_expansion,
)


@pytest.mark.parametrize(
    "query",
    [
        "刚才说的那个仓库是哪个？",
        "之前定的预算上限是多少？",
        "上次提到的供应商合同编号是什么？",
        "前面说的温度要求",
        "第二个方案怎么样？",
        "What was the budget we agreed on?",
        "Remind me of the warehouse rule.",
        "Go with the second one.",
        "As we said earlier, ship on Monday.",
        "what about that plan we discussed",
        "the previous invoice",
    ],
)
def test_references_are_detected_in_chinese_and_english(query: str) -> None:
    assert has_reference(query)


@pytest.mark.parametrize("query", ["华东仓库存还有多少？", "Ship 40 pallets to Osaka.", "hello"])
def test_plain_questions_are_not_references(query: str) -> None:
    assert not has_reference(query)


def test_entities_cover_quotes_codes_numbers_names_and_chinese_phrases() -> None:
    entities = extract_entities(
        'Invoice INV-20931 for Priya Raman: "net 30" terms, 12,400 USD, call 138-0013-4567. '
        "客户联系人是王建国"
    )
    for expected in ("INV-20931", "Priya Raman", "net 30", "12,400", "138-0013-4567"):
        assert expected in entities
    assert any("王建国" in e for e in entities)
    assert "3" not in extract_entities("plan Q3 and Beta-2")


def test_cue_and_question_words_are_not_search_terms() -> None:
    assert content_terms("What was the budget we agreed on for cloud servers?") == (
        "budget",
        "cloud",
        "servers",
        "server",  # the stem: "server" in a chunk matches too
    )
    assert content_terms("刚才说的那个仓库是哪个？") == ("仓库",)


def test_a_vague_reference_is_resolved_with_the_last_turns() -> None:
    recent = ["Compare plan Alpha with plan Beta-2 for the Q3 rollout.", "Alpha is cheaper."]
    query = rewrite("what about the second one?", recent)
    assert query.has_reference
    assert "Beta-2" in query.context_entities
    assert "Beta-2" in query.text and "beta-2" in query.terms


def test_a_vague_reference_with_nothing_named_before_it_stays_as_asked() -> None:
    query = rewrite("what about the second one?", ["ok", "sounds good"])
    assert query.has_reference and query.context_entities == ()
    assert query == rewrite("what about the second one?")


def test_a_reference_with_its_own_content_is_not_padded() -> None:
    query = rewrite("What was the budget we agreed on for cloud servers?", ["Alpha wins."])
    assert query.context_entities == ()
    assert query.text == "What was the budget for cloud servers?"


def test_nothing_to_extract_falls_back_to_the_raw_query() -> None:
    assert rewrite("吗？").text == "吗？"
    assert rewrite("what was it?").text == "what was it?"


def test_question_openers_are_not_glued_to_names() -> None:
    for opener in ("Would", "Has", "Have", "Should", "Will", "Did"):
        entities = extract_entities(f"{opener} Caroline go hiking with Mel?")
        assert "Caroline" in entities and "Mel" in entities
        assert not any(e.startswith(opener) for e in entities)


def test_a_named_day_is_read_against_the_time_of_asking() -> None:
    asked = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
    query = rewrite("What did I cook on 12 March?", asked_at=asked)
    assert query.period is not None and query.period.start == datetime(2026, 3, 12, tzinfo=UTC)
    assert rewrite("What did I cook on 12 March?").period is None  # no time: no date read
    assert rewrite("What did I cook?", asked_at=asked).period is None


def test_a_reader_is_shown_the_question_with_what_a_reference_resolved_to() -> None:
    plain = rewrite("What was the budget we agreed on for cloud servers?")
    assert plain.question == plain.raw
    vague = rewrite("what about the second one?", ["Compare plan Alpha with plan Beta-2."])
    assert vague.question.startswith("what about the second one? (") and "Beta-2" in vague.question


def test_a_models_restatement_adds_search_words_but_no_names_or_days() -> None:
    asked_at = datetime(2026, 5, 4, 12, tzinfo=UTC)
    query = rewrite("What did Tom decide on 3 May?", asked_at=asked_at)
    expanded = with_expansion(query, "Tom chose the Hangzhou supplier, vendor picked")
    assert expanded.text == f"{query.text} Tom chose the Hangzhou supplier, vendor picked"
    assert expanded.terms[: len(query.terms)] == query.terms
    assert {"hangzhou", "supplier", "vendor"} <= set(expanded.terms)
    assert expanded.entities == query.entities and "Hangzhou" not in expanded.entities
    assert expanded.period == query.period is not None
    assert expanded.expansion == "Tom chose the Hangzhou supplier, vendor picked"


@pytest.mark.parametrize(
    ("text", "only_acknowledges"),
    [
        ("ok, thanks!", True),
        ("Sounds good, go on", True),
        ("好的，继续", True),
        ("谢谢！", True),
        ("?", True),
        ("What was the budget?", False),
        ("ok, and INV-2093?", False),
        ("thanks, as we agreed earlier", False),  # a reference always searches
        ("ok, what did we say on 12 March", False),
    ],
)
def test_a_query_of_acknowledgements_only_is_recognised(text: str, only_acknowledges: bool) -> None:
    query = rewrite(text, asked_at=datetime(2026, 5, 4, tzinfo=UTC))
    assert is_acknowledgement(query) is only_acknowledges


def _words(text: str) -> int:
    return len(text.split())


def test_a_query_within_the_cap_is_embedded_whole() -> None:
    assert embedding_focus("What was the budget?", 8, _words) == "What was the budget?"


def test_a_long_query_keeps_its_question_sentences() -> None:
    text = (
        "Here is the log of the deploy. It went through three stages. "
        "Which threshold did we set for the rollback? I forgot it."
    )
    assert embedding_focus(text, 9, _words) == "Which threshold did we set for the rollback?"


def test_without_a_question_the_last_sentences_are_kept_whole() -> None:
    text = "The first stage passed. The canary was fine. Then errors rose sharply."
    assert embedding_focus(text, 9, _words) == "The canary was fine. Then errors rose sharply."


def test_one_sentence_over_the_cap_gives_its_final_tokens() -> None:
    text = " ".join(f"w{i}" for i in range(30))
    focus = embedding_focus(text, 5, _words)
    assert focus == "w25 w26 w27 w28 w29"


def test_the_lexical_search_keeps_the_longest_terms_in_their_order() -> None:
    terms = ["go", "warehouse", "the", "suzhou", "ok", "invoice"]
    assert likeliest_rare(terms, 3) == ["warehouse", "suzhou", "invoice"]
    assert likeliest_rare(terms, 10) == terms
