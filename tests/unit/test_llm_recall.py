"""Parsing a judging model's reply (app/providers/llm_recall.py): what counts as scores."""

from __future__ import annotations

import pytest

from app.core.ports import RerankerUnavailable
from app.providers.llm_recall import parse_judgement


@pytest.mark.parametrize(
    ("reply", "scores"),
    [
        ("[10, 0, 5]", [1.0, 0.0, 0.5]),
        ("Scores: [10, 0, 5].", [1.0, 0.0, 0.5]),
        ("```json\n[7.5, 0, 10]\n```", [0.75, 0.0, 1.0]),
        ("[1, 2] was a draft; final: [3, 4, 5]", [0.3, 0.4, 0.5]),
    ],
    ids=["bare", "in prose", "fenced, fractional", "the array of the right length"],
)
def test_a_reply_with_one_score_per_passage_is_read(reply: str, scores: list[float]) -> None:
    assert parse_judgement(reply, 3) == scores


@pytest.mark.parametrize(
    "reply",
    ["", "all relevant", "[10, 0]", "[11, 0, 0]", "[-1, 0, 0]", '["high", 0, 0]', "[true, 0, 0]"],
    ids=["empty", "no array", "too few", "above 10", "negative", "words", "booleans"],
)
def test_anything_else_is_a_failed_judgement(reply: str) -> None:
    with pytest.raises(RerankerUnavailable):
        parse_judgement(reply, 3)
