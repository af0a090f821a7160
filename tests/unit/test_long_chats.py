"""The long-chats set is what docs/RECALL.md says it is: eight chats between two friends,
600+ questions of four kinds whose evidence ids name messages that hold the answer, small
talk that holds no answer, the same set from the same seed."""

from __future__ import annotations

import re
from collections import Counter

from app.evaluation.long_chats import QUESTION_KINDS, LongChat, long_chats, shares_words

CHATS = long_chats()


def _holds(chat: LongChat, text: str, answer: str) -> bool:
    if chat.language == "en":
        return re.search(rf"\b{re.escape(answer)}\b", text) is not None
    return answer in text


def test_eight_chats_hold_600_questions_of_every_kind_in_both_languages() -> None:
    assert len(CHATS) >= 8
    assert sum(len(chat.questions) for chat in CHATS) >= 600
    for language in ("en", "zh"):
        kinds = Counter(q.kind for c in CHATS if c.language == language for q in c.questions)
        assert set(kinds) == set(QUESTION_KINDS), kinds
    for chat in CHATS:
        assert len({m.speaker for m in chat.messages}) == 2
        assert {m.role for m in chat.messages} == {"user", "assistant"}
        days = [session[0].at.date() for session in chat.sessions]
        assert days == sorted(days) and len(set(days)) == len(days)  # one session a day


def test_every_question_is_answered_by_its_evidence_messages() -> None:
    for chat in CHATS:
        said = {m.id: m for m in chat.messages}
        for question in chat.questions:
            evidence = [said[i] for i in question.evidence]  # every id names a message
            if question.kind == "when":
                assert evidence[0].at.date().isoformat() == question.answer
            elif question.kind == "after":
                assert evidence[0].text == question.answer
            else:
                assert _holds(chat, evidence[-1].text, question.answer), question


def test_multi_hop_questions_need_a_message_from_an_earlier_session() -> None:
    for chat in CHATS:
        for question in (q for q in chat.questions if q.kind == "multi_hop"):
            first, follow = question.evidence
            assert first.split("-s")[1] < follow.split("-s")[1]  # an earlier session


def test_small_talk_holds_no_answer() -> None:
    for chat in CHATS:
        evidence = {i for q in chat.questions for i in q.evidence}
        answers = {q.answer for q in chat.questions if q.kind in ("single", "multi_hop")}
        for message in chat.messages:
            if message.id not in evidence:
                assert not [a for a in answers if _holds(chat, message.text, a)], message


def test_questions_that_share_the_answers_words_and_questions_that_do_not() -> None:
    for language in ("en", "zh"):
        asked = [q for c in CHATS if c.language == language for q in c.questions]
        shared = sum(q.overlap for q in asked) / len(asked)
        assert 0.3 < shared < 0.8, (language, shared)
    assert shares_words("How many people came to Nadia's dinner?", "dinner for six", ["Nadia"])
    assert not shares_words("Where is Nadia moving to?", "Nadia: we got the flat", ["Nadia"])


def test_the_same_seed_gives_the_same_set_and_dev_and_test_halves() -> None:
    again = long_chats()
    assert [q for c in again for q in c.questions] == [q for c in CHATS for q in c.questions]
    splits = Counter(q.split for c in CHATS for q in c.questions)
    assert abs(splits["dev"] - splits["test"]) <= len(CHATS)
