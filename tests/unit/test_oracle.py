"""The scripted LLM of the hard set (app/evaluation/oracle.py): right when told to be, and
wrong, repeatably, on the share of calls it is told to be."""

from __future__ import annotations

from app.evaluation.hard_set import hard_needles
from app.evaluation.oracle import OracleJudge, OracleRewriter

NEEDLES = hard_needles()
NEEDLE = NEEDLES[0]
ANSWER_PASSAGE = f"earlier: {NEEDLE.fact[0]}"


async def test_the_rewrite_uses_the_facts_words_without_its_answers() -> None:
    rewriter = OracleRewriter(NEEDLES, error_rate=0.0)
    restated = await rewriter.rewrite(NEEDLE.question, [])
    assert restated and all(answer not in restated for answer in NEEDLE.answer)
    assert await rewriter.rewrite(NEEDLE.twin, []) == NEEDLE.twin
    resolved = f"{NEEDLE.question} (Alpha)"  # a reference the rule rewrite resolved
    assert await rewriter.rewrite(resolved, []) == restated


async def test_the_judge_scores_the_passages_holding_an_answer() -> None:
    judge = OracleJudge(NEEDLES, error_rate=0.0)
    assert await judge.rerank(NEEDLE.question, ["small talk", ANSWER_PASSAGE]) == [0.0, 1.0]
    assert await judge.rerank(NEEDLE.twin, [ANSWER_PASSAGE, "small talk"]) == [0.0, 0.0]
    assert judge.calls == 2


async def test_an_erring_judge_takes_the_best_passage_without_the_answer() -> None:
    judge = OracleJudge(NEEDLES, error_rate=1.0)
    passages = [ANSWER_PASSAGE, "the distractor", "small talk"]
    assert await judge.rerank(NEEDLE.question, passages) == [0.0, 1.0, 0.0]
    assert await judge.rerank(NEEDLE.twin, ["the distractor", "small talk"]) == [1.0, 0.0]


async def test_errors_fall_on_about_their_share_of_questions_and_repeat() -> None:
    judge = OracleJudge(NEEDLES, error_rate=0.2)
    wrong = [n.id for n in NEEDLES if judge.errs("judge", n.question)]
    assert 0.1 < len(wrong) / len(NEEDLES) < 0.3
    assert wrong == [n.id for n in NEEDLES if OracleJudge(NEEDLES, 0.2).errs("judge", n.question)]
