from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from app.core.dates import Period
from app.core.rerank import (
    NO_MATCH_LINE,
    Candidate,
    EvidenceRules,
    FusionWeights,
    ScoredHit,
    UnitFocus,
    evidence,
    excerpt,
    format_block,
    judged,
    lexical_scores,
    names_speaker,
    pack,
    reorder,
    said_on_the_day,
    scored_by_terms,
    shifted_query,
    truncate_to_tokens,
)
from app.core.rerank import (
    fuse as fuse_with,
)
from app.core.rewrite import RewrittenQuery, rewrite, rewrite_alone
from app.providers.fakes import WhitespaceCounter
from app.services.policies import item_shape
from app.services.recall import evidence_rules
from app.settings import Settings
from tests.builders import T0

COUNT = WhitespaceCounter().count
SETTINGS = Settings(database_url="postgresql://unused")
SHAPE = item_shape(SETTINGS)
CONFIDENCE = SETTINGS.recall.confidence.weights()


def fuse(
    candidates: list[Candidate], query: RewrittenQuery, weights: FusionWeights
) -> list[ScoredHit]:
    """Fusion with the packaged embedder's confidence model."""
    return fuse_with(candidates, query, weights, CONFIDENCE)


def make_candidate(chunk_id: str, **overrides: object) -> Candidate:
    values: dict[str, object] = {
        "chunk_id": chunk_id,
        "turn_start": 1,
        "turn_end": 2,
        "seq_start": 1,
        "seq_end": 2,
        "first_ts": T0,
        "raw_text": f"text of {chunk_id}",
        "tokens": 3,
    }
    values.update(overrides)
    return Candidate(**values)  # type: ignore[arg-type]


def test_lexical_scores_weigh_rare_terms_over_common_ones() -> None:
    texts = ["the cloud budget", "cloud only", "cloud again", "nothing here"]
    full, common, _, none = lexical_scores(("budget", "cloud"), texts)
    assert full == 1.0 and none == 0.0
    assert 0 < common < 0.5  # "cloud" is in three of four texts, "budget" in one
    assert lexical_scores((), ["x"]) == [0.0]


def test_each_candidate_is_scored_with_its_share_of_the_query_terms() -> None:
    texts = ["the cloud budget", "cloud only", "nothing here"]
    candidates = [make_candidate(f"c{i}", raw_text=text) for i, text in enumerate(texts)]
    scored = scored_by_terms(candidates, ("budget", "cloud"))
    assert [c.lexical_score for c in scored] == lexical_scores(("budget", "cloud"), texts)
    assert [c.chunk_id for c in scored] == ["c0", "c1", "c2"]
    assert scored[0].lexical_score == 1.0 and scored[2].lexical_score == 0.0


NO_LIFTS = FusionWeights(term=0, entity=0, recency=0)


def test_words_alone_never_outrank_what_the_question_means() -> None:
    query = rewrite("cloud budget")
    both = make_candidate("both", vector_score=0.05, lexical_score=0.5)
    vector_only = make_candidate("vec", vector_score=0.06)
    lexical_only = make_candidate("lex", lexical_score=1.0)
    weak = make_candidate("weak", vector_score=0.01)
    hits = fuse([vector_only, lexical_only, both, weak], query, FusionWeights(0.03, 0, 0))
    assert [h.candidate.chunk_id for h in hits] == ["both", "vec", "lex", "weak"]
    # a lexical-only chunk starts at the weakest vector score, so without lifts it ties it
    plain = fuse([vector_only, lexical_only, weak], query, NO_LIFTS)
    assert plain[-1].score == plain[-2].score == 0.01
    # with no vectors at all (embedder down) the lexical share decides
    lexical = fuse(
        [lexical_only, make_candidate("less", lexical_score=0.2)], query, FusionWeights(0.03, 0, 0)
    )
    assert [h.candidate.chunk_id for h in lexical] == ["lex", "less"]


def test_a_hits_margin_is_its_lead_over_the_median_candidate() -> None:
    scores = [0.09, 0.05, 0.04, 0.03, 0.01]
    hits = fuse(
        [make_candidate(f"c{i}", vector_score=v) for i, v in enumerate(scores)],
        rewrite("q"),
        NO_LIFTS,
    )
    assert [round(h.margin, 6) for h in hits] == [0.05, 0.01, 0.0, -0.01, -0.03]


def test_exact_entity_matches_and_recency_break_ties() -> None:
    query = rewrite("invoice INV-20931")
    with_entity = make_candidate("a", vector_score=0.5, raw_text="INV-20931 is overdue")
    without = make_candidate("b", vector_score=0.5, raw_text="another invoice")
    hits = fuse([without, with_entity], query, FusionWeights(term=0, entity=0.05, recency=0))
    assert hits[0].candidate.chunk_id == "a" and hits[0].entity_matches == 1
    old = make_candidate("old", vector_score=0.5, turn_end=1)
    new = make_candidate("new", vector_score=0.5, turn_end=10)
    by_time = fuse([old, new], rewrite("x"), FusionWeights(term=0, entity=0, recency=0.5))
    assert by_time[0].candidate.chunk_id == "new"


def test_duplicate_candidates_are_fused_once() -> None:
    twice = [make_candidate("a", vector_score=0.9), make_candidate("a", vector_score=0.9)]
    assert len(fuse(twice, rewrite("q"), NO_LIFTS)) == 1


def test_evidence_is_judged_by_margin_or_words_asked_for_or_automatic() -> None:
    hits = [
        ScoredHit(make_candidate(c, vector_score=0.1, lexical_score=share), 0.0, 0, margin=m)
        for c, m, share in (("a", 0.05, 0.0), ("b", 0.02, 0.5), ("c", -0.01, 0.1))
    ]

    def chosen(margin: float, share: float, *, gated: bool) -> list[str]:
        kept = evidence(hits, EvidenceRules(margin, share), gated=gated)
        return [h.candidate.chunk_id for h in kept]

    assert chosen(0.03, 0.4, gated=True) == ["a", "b"]
    assert chosen(0.03, 0.6, gated=True) == ["a"]
    assert chosen(0.03, 0.6, gated=False) == ["a", "b", "c"]
    assert chosen(0.06, 0.6, gated=False) == []  # nothing holds: no match
    assert evidence([], EvidenceRules(0.0, 0.0), gated=False) == []


def test_without_vectors_words_and_entities_decide() -> None:
    worded = ScoredHit(make_candidate("w", lexical_score=0.5), 0.0, 0, margin=0.0)
    named = ScoredHit(make_candidate("n", lexical_score=0.1), 0.0, 1, margin=0.0)
    other = ScoredHit(make_candidate("o", lexical_score=0.1), 0.0, 0, margin=0.9)
    rules = EvidenceRules(min_margin=0.03, min_share=0.3, words_only=True)
    kept = evidence([worded, named, other], rules, gated=True)
    assert [h.candidate.chunk_id for h in kept] == ["w", "n"]
    with_vectors = EvidenceRules(min_margin=0.03, min_share=0.3)
    assert [h.candidate.chunk_id for h in evidence([named], with_vectors, gated=True)] == []
    by_name = EvidenceRules(min_margin=0.03, min_share=0.3, entities=True)
    assert [h.candidate.chunk_id for h in evidence([named], by_name, gated=True)] == ["n"]


def test_external_scores_reorder_the_hits() -> None:
    hits = [ScoredHit(make_candidate("a"), 0.9, 0), ScoredHit(make_candidate("b"), 0.1, 0)]
    assert [h.candidate.chunk_id for h in reorder(hits, [0.2, 0.7])] == ["b", "a"]


def test_hits_beyond_the_rerankers_n_follow_in_fusion_order() -> None:
    hits = [ScoredHit(make_candidate(c), 0.9 - i / 10, 0) for i, c in enumerate("abcd")]
    assert [h.candidate.chunk_id for h in reorder(hits, [0.1, 0.8])] == ["b", "a", "c", "d"]


def test_a_judge_keeps_what_it_scores_at_its_floor_and_nothing_it_did_not_see() -> None:
    hits = [ScoredHit(make_candidate(c), 0.9 - i / 10, 0) for i, c in enumerate("abcd")]
    kept = judged(hits, [0.4, 0.5, 1.0], floor=0.5)
    assert [(h.candidate.chunk_id, h.score) for h in kept] == [("c", 1.0), ("b", 0.5)]
    assert judged(hits, [0.0, 0.0, 0.0, 0.0], floor=0.5) == []


def test_truncation_keeps_a_prefix_within_the_cap() -> None:
    text = " ".join(f"w{i}" for i in range(100))
    cut, truncated = truncate_to_tokens(text, 10, COUNT)
    assert truncated and COUNT(cut) <= 10 and text.startswith(cut)
    assert truncate_to_tokens("short text", 10, COUNT) == ("short text", False)


def hit(chunk_id: str, score: float, **overrides: object) -> ScoredHit:
    return ScoredHit(make_candidate(chunk_id, **overrides), score, 0)


def test_packing_respects_k_budget_window_and_orders_by_time() -> None:
    long_text = " ".join(f"w{i}" for i in range(300))
    hits = [
        hit("late", 0.9, turn_start=20, turn_end=21, seq_start=40, seq_end=41),
        hit("inwin", 0.8, turn_start=30, seq_start=60, seq_end=61),
        hit("early", 0.7, turn_start=3, seq_start=5, seq_end=6, raw_text=long_text),
        hit("late", 0.6, turn_start=20, seq_start=40, seq_end=41),
        hit("fourth", 0.5, turn_start=9, seq_start=9, seq_end=9),
    ]
    items = pack(
        hits,
        top_k=2,
        budget_tokens=1000,
        per_chunk_tokens=50,
        window_seqs={60, 61},
        count=COUNT,
        shape=SHAPE,
    )
    assert [i.hit.candidate.chunk_id for i in items] == ["early", "late"]
    early = items[0]
    assert early.truncated and early.tokens <= 50 and "GET chunk early" in early.text
    assert [i.hit.score for i in items] == [0.7, 0.9]
    tight = pack(
        hits,
        top_k=5,
        budget_tokens=30,
        per_chunk_tokens=50,
        window_seqs=(),
        count=COUNT,
        shape=SHAPE,
    )
    assert sum(i.tokens for i in tight) <= 30


def test_block_items_are_headed_with_time_turns_and_chunk_id() -> None:
    items = pack(
        [hit("ck_1", 0.5, first_ts=T0 + timedelta(hours=1))],
        top_k=1,
        budget_tokens=100,
        per_chunk_tokens=100,
        window_seqs=(),
        count=COUNT,
        shape=SHAPE,
    )
    block = format_block(items)
    assert block.startswith("[2026-11-30T13:00:00+00:00 | turn 1-2 | ck_1]\ntext of ck_1")
    assert "Do not guess" in NO_MATCH_LINE


def test_the_share_of_query_terms_adds_to_the_fused_score() -> None:
    query = rewrite("cloud budget")
    matched = make_candidate("m", vector_score=0.05, lexical_score=1.0)
    unmatched = make_candidate("u", vector_score=0.06)
    hits = fuse([unmatched, matched], query, FusionWeights(term=0.05, entity=0, recency=0))
    assert hits[0].candidate.chunk_id == "m"


def test_an_excerpt_keeps_the_sentences_around_the_best_match() -> None:
    text = " ".join(f"Filler sentence number {i} here." for i in range(30))
    text = text.replace("number 20 here.", "number 20 says the NorthLine limit is 820 kg.")
    cut, truncated = excerpt(text, 25, COUNT, focus=["northline"])
    assert truncated and "NorthLine limit is 820 kg." in cut
    assert cut.startswith("[…] ") and cut.endswith(" […]") and COUNT(cut) <= 27
    head, _ = excerpt(text, 12, COUNT, focus=["absent"])
    assert head.startswith("Filler sentence number 0") and not head.startswith("[…]")
    one_long = "word " * 100
    cut_long, truncated_long = excerpt(one_long, 10, COUNT, focus=["word"])
    assert truncated_long and COUNT(cut_long) <= 10
    assert excerpt("short.", 10, COUNT) == ("short.", False)


def test_packing_stops_when_the_budget_has_no_room_for_another_item() -> None:
    hits = [hit("a", 0.9, raw_text=" ".join(["w"] * 40)), hit("b", 0.8)]
    items = pack(
        hits,
        top_k=5,
        budget_tokens=60,
        per_chunk_tokens=60,
        window_seqs=(),
        count=COUNT,
        shape=SHAPE,
    )
    assert [i.hit.candidate.chunk_id for i in items] == ["a"]
    assert (
        pack(
            hits,
            top_k=5,
            budget_tokens=5,
            per_chunk_tokens=60,
            window_seqs=(),
            count=COUNT,
            shape=SHAPE,
        )
        == []
    )


def test_a_chunk_is_packed_once_even_if_listed_twice() -> None:
    items = pack(
        [hit("a", 0.9), hit("a", 0.8)],
        top_k=5,
        budget_tokens=500,
        per_chunk_tokens=100,
        window_seqs=(),
        count=COUNT,
        shape=SHAPE,
    )
    assert len(items) == 1


def test_the_query_is_shifted_away_from_generic_questions() -> None:
    assert shifted_query([1.0, 0.5], [0.5, 0.5], 1.0) == [0.5, 0.0]
    assert shifted_query([1.0, 0.5], None, 1.0) == [1.0, 0.5]
    assert shifted_query([1.0, 0.5], [0.5, 0.5], 0.0) == [1.0, 0.5]


def test_a_unit_is_lifted_when_said_on_the_day_or_by_the_speaker_asked_about() -> None:
    day = Period(T0, T0 + timedelta(days=1))
    focus = UnitFocus("What did Tom say?", day, period_bonus=0.1, speaker_bonus=0.05)
    assert focus.bonus(T0 + timedelta(hours=3), "Tom") == 0.1 + 0.05
    assert focus.bonus(T0 - timedelta(hours=1), "Tom") == 0.05
    assert focus.bonus(T0, None) == 0.1
    assert focus.bonus(T0 - timedelta(days=2), "Maya") == 0.0
    assert UnitFocus("anything", None, 0.1, 0.05).bonus(T0, "Tom") == 0.0


def test_a_speaker_is_named_as_a_word_or_as_cjk_text() -> None:
    assert names_speaker("what did tom say", "Tom")
    assert not names_speaker("what about tomorrow", "Tom")
    assert names_speaker("小林说她要去哪里？", "小林")
    assert not names_speaker("老周说的", "小林")


def test_a_question_naming_a_day_is_answered_from_that_day_only() -> None:
    day = Period(T0 + timedelta(days=1), T0 + timedelta(days=2))
    that_day = make_candidate("day", first_ts=T0 + timedelta(days=1, hours=2))
    spanning = make_candidate("span", first_ts=T0, last_ts=T0 + timedelta(days=1, hours=1))
    before = make_candidate("before", first_ts=T0, last_ts=T0 + timedelta(hours=5))
    hits = [
        ScoredHit(before, 0.3, 0, margin=0.2),
        ScoredHit(that_day, 0.2, 0, margin=0.1),
        ScoredHit(spanning, 0.1, 0, margin=0.05),
    ]
    kept = evidence(hits, EvidenceRules(0.04, 0.5, period=day), gated=True)
    assert [h.candidate.chunk_id for h in kept] == ["day", "span"]
    assert evidence(hits, EvidenceRules(0.15, 0.5, period=day), gated=False) == []


def test_lifts_rank_but_are_no_evidence() -> None:
    lifted = make_candidate("lifted", vector_score=0.02, lift=0.1)
    plain = make_candidate("plain", vector_score=0.05)
    third = make_candidate("third", vector_score=0.01)
    hits = fuse([plain, lifted, third], rewrite("q"), NO_LIFTS)
    assert [h.candidate.chunk_id for h in hits] == ["lifted", "plain", "third"]
    assert [round(h.margin, 6) for h in hits] == [0.0, 0.03, -0.01]


def test_fused_hits_are_ranked_with_a_confidence_in_zero_to_one() -> None:
    scores = [0.30, 0.22, 0.21, 0.20, 0.19, 0.10]
    hits = fuse(
        [
            make_candidate(f"c{i}", vector_score=v, similarity=0.8 + v / 2)
            for i, v in enumerate(scores)
        ],
        rewrite("q"),
        NO_LIFTS,
    )
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5, 6]
    assert [round(h.lead, 6) for h in hits] == [0.08, 0.01, 0.01, 0.01, 0.09, 0.0]
    assert all(0 <= h.confidence <= 1 for h in hits)
    # A clear first is surer than the crowd behind it.
    assert hits[0].confidence > max(h.confidence for h in hits[1:])


def test_a_hit_below_the_confidence_floor_is_no_evidence_unless_it_names_the_entity() -> None:
    sure = ScoredHit(make_candidate("s", vector_score=0.1), 0.0, 0, margin=0.05, confidence=0.6)
    unsure = ScoredHit(make_candidate("u", vector_score=0.1), 0.0, 0, margin=0.05, confidence=0.05)
    named = ScoredHit(make_candidate("n", vector_score=0.1), 0.0, 1, margin=0.0, confidence=0.01)
    rules = EvidenceRules(min_margin=0.02, min_share=0.3, min_confidence=0.1, entities=True)
    assert [h.candidate.chunk_id for h in evidence([sure, unsure], rules, gated=True)] == ["s"]
    assert evidence([unsure], rules, gated=False) == []  # a topic never discussed: no match
    assert [h.candidate.chunk_id for h in evidence([named], rules, gated=True)] == ["n"]


def test_hits_said_on_the_named_day_have_the_day_floor_and_no_confidence_floor() -> None:
    """The confidence was fitted on margins against the whole history; within one named day
    the margins are smaller, and a confidence floor there turned most day questions into "no
    match" (hard set, quick form: 11 of 13 Chinese ones)."""
    day = Period(T0 + timedelta(days=1), T0 + timedelta(days=2))
    that_day = make_candidate("day", first_ts=T0 + timedelta(days=1, hours=2))
    hits = [ScoredHit(that_day, 0.2, 0, margin=0.01, confidence=0.02)]
    rules = EvidenceRules(0.05, 0.5, min_confidence=0.1, period=day, period_min_margin=0.005)
    assert evidence(hits, rules, gated=True) == hits
    assert evidence(hits, replace(rules, period=None), gated=True) == []


def test_a_named_day_nothing_was_said_on_leaves_the_rest_to_answer_by_the_usual_floors() -> None:
    """History imported without times, or a day with no message: a hint, not a wall."""
    day = Period(T0 + timedelta(days=9), T0 + timedelta(days=10))
    strong = ScoredHit(make_candidate("strong", first_ts=T0), 0.3, 0, margin=0.2, confidence=0.6)
    weak = ScoredHit(make_candidate("weak", first_ts=T0), 0.2, 0, margin=0.01, confidence=0.02)
    rules = EvidenceRules(0.05, 0.5, min_confidence=0.1, period=day, period_min_margin=0.005)
    assert said_on_the_day([strong, weak], day) is None
    assert evidence([strong, weak], rules, gated=True) == [strong]
    assert evidence([weak], rules, gated=True) == []  # the day's low floor is not theirs


def test_recall_asked_for_gives_a_named_day_its_own_margin_floor() -> None:
    asked = T0 + timedelta(days=60)
    settings = SETTINGS.recall
    question = rewrite_alone("2月9日我在家修好了什么？", asked)
    day = evidence_rules(settings, question, [], asked=True)
    turn = evidence_rules(settings, question, [], asked=False)
    assert day.period is not None and day.period_min_margin == settings.asked_period_min_margin
    assert day.min_confidence == settings.asked_min_confidence  # for the hits of other days
    assert turn.period_min_margin is None and turn.min_confidence == 0.0
