"""What a turn injects of the hits found (app/core/injection.py): need, novelty, two tiers."""

from __future__ import annotations

from dataclasses import replace

from app.core.injection import (
    POINTERS_HEADER,
    InjectionRules,
    Need,
    asks_question,
    need_of,
    pointer_line,
    pointers_block,
    seen_share,
    tiers,
)
from app.core.lexical import term_set
from app.core.rerank import ScoredHit
from app.core.rewrite import rewrite
from app.providers.fakes import WhitespaceCounter
from tests.unit.test_rerank import make_candidate

RULES = InjectionRules(
    unasked_confidence=0.9,
    asked_confidence=0.5,
    referenced_confidence=0.3,
    pointer_confidence=0.2,
    max_pointers=2,
    max_seen_overlap=0.85,
)
COUNT = WhitespaceCounter().count


def hit(chunk_id: str, confidence: float, text: str = "", entities: int = 0) -> ScoredHit:
    candidate = make_candidate(chunk_id, raw_text=text or f"the {chunk_id} detail said once")
    return ScoredHit(candidate, confidence, entities, confidence=confidence)


def test_a_question_is_read_by_its_mark_or_its_opening_word_in_either_language() -> None:
    assert asks_question("the port for staging?")
    assert asks_question("Which port did we pick for staging")
    assert asks_question("OK. what did Marta say about it")
    assert asks_question("上次那个仓库叫什么")
    assert not asks_question("The tomatoes are growing well this week.")
    assert not asks_question("今天又在菜园里忙了一阵。")
    assert not asks_question("摘了一碗小番茄和几个西葫芦。")  # 几个: "a few", not "how many"
    assert asks_question("会议是几点开始")
    assert not asks_question("检查了辣椒有没有蚜虫。")  # an embedded "whether"


def test_need_is_referenced_for_a_reference_or_force_asked_for_a_question_or_a_named_entity() -> (
    None
):
    assert need_of(rewrite("the code word I told you"), [], forced=False) is Need.REFERENCED
    assert need_of(rewrite("tomatoes are fine"), [], forced=True) is Need.REFERENCED
    assert need_of(rewrite("Which port for staging?"), [], forced=False) is Need.ASKED
    named = [hit("a", 0.4, entities=1)]
    assert need_of(rewrite("Zorblax again today"), named, forced=False) is Need.ASKED
    assert need_of(rewrite("The tomatoes grow well."), [hit("a", 0.4)], forced=False) is (
        Need.UNASKED
    )
    said = term_set("We talked about Zorblax all week")
    known = need_of(rewrite("Zorblax again today"), named, forced=False, seen_terms=said)
    assert known is Need.UNASKED  # the prompt names it already: nothing asked of the past


def test_the_evidence_floor_falls_as_the_turn_asks_more_of_the_past() -> None:
    floors = [RULES.evidence_floor(need) for need in (Need.UNASKED, Need.ASKED, Need.REFERENCED)]
    assert floors == [0.9, 0.5, 0.3]


def test_a_hit_whose_terms_the_prompt_holds_is_repeated_not_injected() -> None:
    said = "Marta renewed the Hetzner contract in Frankfurt last March"
    seen = term_set(said)
    assert seen_share(make_candidate("a", raw_text=said), seen) == 1.0
    assert seen_share(make_candidate("b", raw_text="... !!"), seen) == 0.0  # no content terms
    split = tiers([hit("a", 0.95, said), hit("b", 0.95)], Need.ASKED, RULES, seen)
    assert [h.candidate.chunk_id for h in split.repeated] == ["a"]
    assert [h.candidate.chunk_id for h in split.evidence] == ["b"]


def test_hits_split_into_evidence_pointers_and_nothing_by_confidence_and_need() -> None:
    hits = [hit("a", 0.7), hit("b", 0.45), hit("c", 0.35), hit("d", 0.25), hit("e", 0.1)]
    asked = tiers(hits, Need.ASKED, RULES, frozenset())
    assert [h.candidate.chunk_id for h in asked.evidence] == ["a"]
    assert [h.candidate.chunk_id for h in asked.pointers] == ["b", "c"]  # max_pointers
    referenced = tiers(hits, Need.REFERENCED, RULES, frozenset())
    assert [h.candidate.chunk_id for h in referenced.evidence] == ["a", "b", "c"]
    unasked = tiers(hits, Need.UNASKED, RULES, frozenset())
    assert unasked.evidence == [] and unasked.pointers == []  # nothing asked: no pointers
    strong = tiers([hit("a", 0.95)], Need.UNASKED, RULES, frozenset())
    assert [h.candidate.chunk_id for h in strong.evidence] == ["a"]


def test_a_pointer_names_the_chunk_its_turns_its_day_and_a_gist_in_its_own_words() -> None:
    text = (
        "We met at the cafe. The staging port is 5433 on the Lisbon replica. "
        "Then we talked about lunch plans for a while."
    )
    candidate = replace(make_candidate("ck_9", raw_text=text), turn_start=4, turn_end=6)
    line = pointer_line(candidate, 10, COUNT, ["port", "staging"])
    assert line.startswith("- ck_9 (turns 4-6, ")
    assert "The staging port is 5433" in line and "lunch" not in line
    assert pointers_block([line]) == f"{POINTERS_HEADER}\n{line}"
    assert pointers_block([]) is None


def test_a_detail_among_repeated_talk_is_judged_by_the_sentences_the_query_names() -> None:
    talk = (
        "The weather was fine and we walked the dog along the river again. Later my sister "
        "came over for dinner with her two kids, and we played cards until midnight."
    )
    detail = "Vault code: Quokkafjord."
    candidate = make_candidate("a", raw_text=f"{talk} {detail} {talk}")
    seen = term_set(talk)
    assert seen_share(candidate, seen) > 0.85  # the whole chunk: mostly talk the prompt holds
    assert seen_share(candidate, seen, ["vault", "code"]) == 0.0
    assert seen_share(candidate, seen, ["unrelated"]) > 0.85  # no sentence named: all of it


def test_a_hit_held_by_the_rule_floors_is_evidence_when_the_turn_asks() -> None:
    hits = [hit("a", 0.1), hit("b", 0.1)]
    asked = tiers(hits, Need.ASKED, RULES, frozenset(), vouched={"a"})
    assert [h.candidate.chunk_id for h in asked.evidence] == ["a"] and asked.pointers == []
    unasked = tiers(hits, Need.UNASKED, RULES, frozenset(), vouched={"a"})
    assert unasked.evidence == []  # nothing asked: only strong confidence injects


def test_a_weak_hit_the_prompt_holds_is_neither_injected_nor_counted_as_held() -> None:
    said = "Marta renewed the Hetzner contract in Frankfurt last March"
    split = tiers([hit("a", 0.25, said)], Need.ASKED, RULES, term_set(said))
    assert split == tiers([], Need.ASKED, RULES, frozenset())  # a no-match, not "held"
