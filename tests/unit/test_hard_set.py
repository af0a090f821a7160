"""The hard recall set keeps its own rules (docs/RECALL.md): questions in other words than
their facts, distractors that share the question's words, answers found nowhere else, and
conversations that put every fact where the measurement expects it."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime

import pytest

from app.core.rewrite import embedding_focus, is_acknowledgement, rewrite
from app.evaluation.hard_set import (
    FACT_REGION_END,
    KINDS,
    LANGUAGES,
    ZONES,
    HardNeedle,
    conversation,
    filler_pools,
    hard_needles,
)
from app.providers.tokenizer import default_counter
from app.settings import RecallSettings

STOPWORDS_EN = frozenset(
    "a an the of for to in on at by with and or is are was were be been do does did what which "
    "who whom whose when where why how we you i it its that this those these our your my me us "
    "am will would can could should there their they them he she his her him so if as up out "
    "about after before from into over than then too very just all any some no not one two get "
    "got go going going new now say said says did done has have had much many more most own "
    "time".split()
)
FUNCTION_CHARS_ZH = set(
    "我你他她它们的了是在有和就都也还要会说这那个么什吗呢吧啊一不上下里到给让被把从对得着过来去哪多少几"
)
_WORD = re.compile(r"[a-z0-9][a-z0-9'\-.,:]*[a-z0-9]|[a-z0-9]")
_CJK = re.compile(r"[\u4e00-\u9fff]+")


def _stem(word: str) -> str:
    word = word.removesuffix("'s")
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    """English: stemmed words without stopwords; Chinese: character bigrams of the runs
    left once function characters are taken out."""
    words = {_stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS_EN}
    for run in _CJK.findall(text):
        for piece in re.split("[" + "".join(FUNCTION_CHARS_ZH) + "]", run):
            words.update(piece[i : i + 2] for i in range(len(piece) - 1))
    return {w for w in words if w not in STOPWORDS_EN}


def _fact(needle: HardNeedle) -> str:
    return " ".join(needle.fact)


NEEDLES = hard_needles()


def test_the_set_is_large_and_balanced() -> None:
    assert len(NEEDLES) >= 150
    assert len({n.id for n in NEEDLES}) == len(NEEDLES)
    by_language = Counter(n.language for n in NEEDLES)
    assert by_language["en"] == by_language["zh"]
    for language in LANGUAGES:
        kinds = Counter(n.kind for n in NEEDLES if n.language == language)
        assert set(kinds) == set(KINDS)
        assert min(kinds.values()) >= 12
        splits = Counter(n.split_name for n in NEEDLES if n.language == language)
        assert splits["dev"] == splits["test"]


@pytest.mark.parametrize("needle", NEEDLES, ids=lambda n: n.id)
def test_a_needle_keeps_the_rules(needle: HardNeedle) -> None:
    fact = _fact(needle)
    question = content_words(needle.question)
    assert len(question & content_words(fact)) <= 1, question & content_words(fact)
    shared_with_distractor = question & content_words(needle.distractor)
    assert len(shared_with_distractor) >= 1
    assert len(shared_with_distractor) >= len(question & content_words(fact))
    for answer in needle.answer:
        assert answer in fact
        for elsewhere in (needle.question, needle.distractor, needle.twin):
            assert answer not in elsewhere
    assert (len(needle.fact) == 2) == (needle.kind == "split")
    assert (needle.speaker is not None) == (needle.kind == "speaker")
    if needle.kind == "speaker":
        assert needle.speaker in needle.question
        assert needle.distractor_speaker not in (None, needle.speaker)
    assert (needle.said_on is not None) == (needle.kind == "dated")
    if needle.kind == "dated":
        assert needle.distractor_on not in (None, needle.said_on)


def test_an_answer_is_said_nowhere_but_in_its_fact() -> None:
    pools = filler_pools()
    for needle in NEEDLES:
        others = [
            text
            for other in NEEDLES
            if other is not needle
            for text in (*other.fact, other.distractor, other.question, other.twin)
        ]
        pool = pools[needle.language]
        for answer in needle.answer:
            assert not [t for t in [*others, *pool.user, *pool.assistant] if answer in t], (
                needle.id,
                answer,
            )


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_conversation_puts_every_fact_in_its_first_two_thirds(language: str) -> None:
    counter = default_counter()
    chat = conversation(language, 1, window=3000, pressure=3, count=counter.count)  # type: ignore[arg-type]
    assert 0.75 * 9000 <= chat.tokens <= 1.25 * 9000
    placed = chat.fact_turns()
    assert set(placed) == {n.id for n in chat.needles}
    assert max(placed.values()) < len(chat.turns) * 2 // 3 + 1
    times = [m.created_at for messages in chat.turns for m in messages]
    assert times == sorted(times)
    zone = ZONES[language]  # type: ignore[index]
    for needle in chat.needles:
        said = next(m for m in chat.turns[placed[needle.id]] if needle.fact[0] in m.content)
        if needle.said_on is not None:
            assert said.created_at.astimezone(zone).date() == needle.said_on
        assert said.created_at.date() <= FACT_REGION_END
        assert said.name == needle.speaker


def test_every_question_of_the_set_is_embedded_whole_and_searched() -> None:
    """What the query cap and the acknowledgement skip cost the hard recall set: nothing. Each
    question and twin, as rewritten, fits the embedding cap and is not a bare acknowledgement."""
    cap = RecallSettings().query_embed_tokens
    count = default_counter().count
    asked = [text for n in hard_needles() for text in (n.question, n.twin)]
    for text in asked:
        query = rewrite(text, asked_at=datetime(2026, 5, 4, tzinfo=UTC))
        assert embedding_focus(query.text, cap, count) == query.text, text
        assert not is_acknowledgement(query), text
