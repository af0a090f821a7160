from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from app.core.chunker import (
    TopicPolicy,
    UnitPolicy,
    as_budget_unit,
    build_chunks,
    group_units,
    make_stub,
    message_unit_texts,
    oversize_chunk,
    oversize_limit,
    render_message,
    segment,
)
from app.core.lexical import distinct_terms, lexical_terms
from app.core.types import ChunkKind
from app.core.vectors import cosine, mean_vector
from app.providers.fakes import WhitespaceCounter
from tests.builders import T0, assistant, make_window_message, tool, user, words

COUNTER = WhitespaceCounter()
UNITS = UnitPolicy(max_tokens=64, max_units=32)


def ids() -> object:
    counter = iter(range(1, 1000))
    return lambda: f"ck_{next(counter)}"


def tokens_only(max_tokens: int) -> TopicPolicy:
    return TopicPolicy(
        min_tokens=1, max_tokens=max_tokens, similarity=0.5, overlap=False, units=UNITS
    )


def conversation() -> list:
    return [
        make_window_message(seq=1, turn=1, message=user("plan the trip")),
        make_window_message(seq=2, turn=1, message=assistant(None, [("c1", "weather")])),
        make_window_message(seq=3, turn=2, message=tool("c1", "sunny")),
        make_window_message(seq=4, turn=2, message=assistant("It is sunny.")),
        make_window_message(seq=5, turn=3, message=user("and tomorrow?")),
    ]


def test_tool_call_and_its_results_form_one_unit() -> None:
    groups = group_units(conversation())
    assert [[m.seq for m in g] for g in groups] == [[1], [2, 3], [4], [5]]


def test_unit_is_pinned_when_in_current_turn_or_awaiting_results() -> None:
    groups = group_units(conversation())
    assert not as_budget_unit(groups[1], current_turn=3).pinned
    assert as_budget_unit(groups[3], current_turn=3).pinned
    waiting = [make_window_message(seq=9, turn=1, message=assistant(None, [("c9", "slow")]))]
    assert as_budget_unit(waiting, current_turn=5).pinned
    calibrated = as_budget_unit(groups[0], current_turn=3, token_ratio=1.5)
    assert calibrated.tokens == 15


def test_chunks_respect_max_tokens_and_never_split_a_unit() -> None:
    window = [
        make_window_message(seq=i, turn=i, message=user(words(40)), tokens=45) for i in range(1, 7)
    ]
    groups = [[m] for m in window]
    drafts = [d for d, _ in build_chunks(groups, COUNTER, tokens_only(100), new_id=ids())]
    assert [d.seqs for d in drafts] == [(1, 2), (3, 4), (5, 6)]
    assert all(d.tokens <= 100 for d in drafts)
    assert drafts[0].turn_start == 1 and drafts[0].turn_end == 2
    assert drafts[0].kind is ChunkKind.OFFLOAD


def test_a_unit_larger_than_max_is_a_chunk_of_its_own() -> None:
    groups = group_units(conversation()[:4])
    drafts = [d for d, _ in build_chunks(groups, COUNTER, tokens_only(5), new_id=ids())]
    assert [d.seqs for d in drafts] == [(1,), (2, 3), (4,)]


def test_chunk_raw_text_keeps_every_message_verbatim_with_a_header() -> None:
    chinese = "只查华东仓的库存，不要华南仓。"
    window = [
        make_window_message(seq=1, turn=4, message=user(chinese)),
        make_window_message(
            seq=2,
            turn=4,
            message=assistant(None, [("c7", "stock")]),
            created_at=T0 + timedelta(seconds=5),
        ),
        make_window_message(seq=3, turn=4, message=tool("c7", '{"rows": 3}')),
    ]
    ((draft, _),) = build_chunks(group_units(window), COUNTER, tokens_only(500), new_id=ids())
    assert chinese in draft.raw_text
    assert '{"rows": 3}' in draft.raw_text
    assert '"id": "c7"' in draft.raw_text
    assert draft.raw_text.startswith("[turn 4 · user · 2026-11-30T12:00:00+00:00]")
    assert draft.roles == ("user", "assistant", "tool")
    assert draft.last_ts == T0 + timedelta(seconds=5)
    assert draft.summary_hint == chinese
    assert "华东" in draft.lexical_terms
    assert len(draft.content_hash) == 64


def test_rendered_header_names_tool_call_ids_and_speakers() -> None:
    named = replace(user("hi"), name="alice")
    assert render_message(make_window_message(message=named)).startswith("[turn 1 · user alice")
    assert "tool c1" in render_message(make_window_message(message=tool("c1", "x")))


def test_oversize_message_gets_its_own_chunk_and_a_traceable_stub() -> None:
    text = "\n".join(f"line {i}" for i in range(100))
    item = make_window_message(seq=7, turn=3, message=tool("c1", text), tokens=300)
    draft = oversize_chunk(item, COUNTER, "ck_big", UNITS)
    assert draft.kind is ChunkKind.OVERSIZE and text in draft.raw_text
    stub = make_stub("ck_big", text, 300, head_lines=2, tail_lines=2, max_line_chars=50)
    assert "ck_big" in stub and "300 tokens" in stub and "100 lines" in stub
    assert "line 0\nline 1\n" in stub and stub.endswith("line 98\nline 99")
    assert "96 lines not shown" in stub
    short = make_stub("ck_s", "a\nb", 5, head_lines=5, tail_lines=3, max_line_chars=50)
    assert "not shown" not in short and short.endswith("a\nb")
    one_line = make_stub("ck_l", "x" * 10_000, 2_000, head_lines=5, tail_lines=3, max_line_chars=50)
    assert len(one_line) < 300 and one_line.endswith("x […]")


def test_oversize_limit_is_a_share_of_the_budget_with_an_absolute_cap() -> None:
    assert oversize_limit(8_000, 0.25, 4_000) == 2_000
    assert oversize_limit(1_000_000, 0.25, 4_000) == 4_000


def test_lexical_terms_split_latin_words_and_cjk_bigrams() -> None:
    assert lexical_terms("Order A-1042 只查华东仓") == [
        "order",
        "a-1042",
        "只查",
        "查华",
        "华东",
        "东仓",
    ]
    assert lexical_terms("仓 x") == ["仓", "x"]
    # English words add their stems; codes, numbers and short words stay as they are
    assert lexical_terms("Hiking impostors INV-7 2026 cats") == [
        "hiking",
        "hike",
        "impostors",
        "impostor",
        "inv-7",
        "2026",
        "cats",
        "cat",
    ]
    assert distinct_terms("a a b") == ("a", "b")


def test_a_topic_change_closes_a_chunk_once_it_holds_min_tokens() -> None:
    policy = TopicPolicy(min_tokens=20, max_tokens=1000, similarity=0.5, overlap=False, units=UNITS)
    weather, trains = [1.0, 0.0], [0.0, 1.0]
    vectors = [weather, weather, trains, trains, weather]
    assert segment([15, 10, 10, 30, 5], vectors, policy) == [[0, 1], [2, 3], [4]]
    # below min_tokens the topic change waits
    assert segment([5, 10, 10], [weather, trains, trains], policy) == [[0, 1, 2]]
    # the token bound always applies
    assert segment([600, 600], [weather, weather], policy) == [[0], [1]]
    # no vectors: token bound only
    assert segment([15, 10, 10], None, policy) == [[0, 1, 2]]


def test_chunks_carry_the_mean_of_their_units_vectors_and_may_overlap() -> None:
    window = [
        make_window_message(seq=i, turn=i, message=user(f"message {i} " + words(20)))
        for i in range(1, 5)
    ]
    vectors = [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]
    policy = TopicPolicy(min_tokens=1, max_tokens=1000, similarity=0.5, overlap=True, units=UNITS)
    built = build_chunks([[m] for m in window], COUNTER, policy, new_id=ids(), vectors=vectors)
    assert [d.seqs for d, _ in built] == [(1, 2), (2, 3, 4)]
    assert built[0][1] == [1.0, 0.0]
    assert cosine(built[1][1] or [], mean_vector([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])) > 0.999
    assert cosine([0.0, 0.0], [1.0, 0.0]) == 0.0


def test_a_short_message_is_one_unit_named_by_its_speaker() -> None:
    named = replace(user("the spare key is under the pot"), name="Maya")
    items = [
        make_window_message(seq=1, turn=1, message=named),
        make_window_message(seq=2, turn=1, message=assistant(None, [("c1", "lookup")])),
        make_window_message(seq=3, turn=2, message=tool("c1", "found it")),
    ]
    ((draft, _),) = build_chunks([items], COUNTER, tokens_only(500), new_id=ids())
    assert draft.unit_texts()[0] == "Maya: the spare key is under the pot"
    assert draft.unit_texts()[1].startswith('tool_call {"id": "c1"')
    assert draft.unit_texts()[2] == "found it"
    assert [u.seq for u in draft.units] == [1, 2, 3]
    assert [u.ord for u in draft.units] == [0, 1, 2]
    for unit in draft.units:  # each unit's text is a span of the stored text, not a copy
        assert draft.raw_text[unit.start : unit.end] in draft.raw_text
        assert unit.created_at == items[unit.seq - 1].created_at
    assert message_unit_texts(items[0], UNITS, COUNTER.count) == [draft.unit_texts()[0]]


def test_a_long_message_gets_a_unit_per_window_of_whole_sentences() -> None:
    sentences = [f"Sentence {i} says {words(9)}." for i in range(12)]  # 12 tokens each
    item = make_window_message(seq=4, turn=2, message=user(" ".join(sentences)))
    windows = message_unit_texts(item, UnitPolicy(max_tokens=30, max_units=32), COUNTER.count)
    assert len(windows) == 6  # two sentences (24 tokens) fit, a third would pass 30
    assert all(COUNTER.count(w) <= 30 for w in windows)
    assert "".join(windows).replace(" ", "") == " ".join(sentences).replace(" ", "")
    capped = message_unit_texts(item, UnitPolicy(max_tokens=30, max_units=2), COUNTER.count)
    assert capped == windows[:2]
    one_sentence = make_window_message(message=user(words(50)))  # no sentence end at all
    assert message_unit_texts(one_sentence, UnitPolicy(30, 32), COUNTER.count) == [words(50)]
