"""Recall's optional LLM help through the service, on the real Postgres: the LLM adapters of
`app/providers/llm_recall.py` over a scripted chat model (the ChatModel port), so the prompts,
the parsing and the fallbacks are the real ones."""

from __future__ import annotations

import json
import re

from app.core.rerank import NO_MATCH_LINE
from app.providers.fakes import ScriptedChatModel
from app.providers.llm_recall import JUDGE_RULES, REWRITE_RULES, LlmQueryRewriter, LlmReranker
from app.services.context import ServiceContext
from app.services.recall import recall_query
from app.store.models import DEFAULT_TENANT
from tests.conftest import make_settings
from tests.integration.test_recall import FACTS, archive_facts, ask, recalled_block

BUDGET_QUESTION = "How much may we spend on hosting each quarter?"
_PASSAGE = re.compile(r"^\[\d+\] ", re.MULTILINE)


def passages(prompt: str) -> list[str]:
    """The passages of a judge prompt, in order."""
    return [passage.strip() for passage in _PASSAGE.split(prompt)[1:]]


def judge_holding(word: str | None) -> ScriptedChatModel:
    """A judging model that scores 10 the passages holding `word`, 0 the others (all of them
    with None), in prose around the array as chatty models do."""

    def reply(system: str, user: str) -> str:
        assert system == JUDGE_RULES
        scores = [10 if word is not None and word in p else 0 for p in passages(user)]
        return f"Here are the scores: {json.dumps(scores)}"

    return ScriptedChatModel(reply)


def use_judge(ctx: ServiceContext, chat: ScriptedChatModel, **reranker: object) -> None:
    ctx.settings = make_settings(reranker={"kind": "llm", **reranker})
    ctx.reranker = LlmReranker(chat)


async def test_a_rewrite_adds_the_words_the_answer_uses(ctx: ServiceContext) -> None:
    await archive_facts(ctx, "l1")
    chat = ScriptedChatModel(lambda system, user: "cloud server budget finance reviews\nextra")
    ctx.query_rewriter = LlmQueryRewriter(chat)
    response = await ask(ctx, "l1", BUDGET_QUESTION, recall="force")
    assert (
        response.recall.query_rewritten == f"{BUDGET_QUESTION} cloud server budget finance reviews"
    )
    assert FACTS[0] in recalled_block(response)
    system, prompt = chat.prompts[0]
    assert system == REWRITE_RULES and prompt.endswith(f"Question: {BUDGET_QUESTION}")
    assert "Recent turns:\n- filler 10" in prompt and "\n- filler 11" in prompt  # references


async def test_recall_asked_for_reports_the_rewrite(ctx: ServiceContext) -> None:
    await archive_facts(ctx, "l2")
    ctx.query_rewriter = LlmQueryRewriter(ScriptedChatModel(lambda s, u: "Suzhou warehouse"))
    result = await recall_query(ctx, DEFAULT_TENANT, "l2", "Where do parcels leave from?", 3)
    assert result.query_rewritten.endswith("Suzhou warehouse")
    assert "rewrite" in result.timings_ms
    assert FACTS[1] in result.results[0].text


async def test_a_rewriter_down_or_slow_leaves_the_rule_rewrite(ctx: ServiceContext) -> None:
    await archive_facts(ctx, "l3")
    question = "What was the budget we agreed on for cloud servers?"
    ctx.query_rewriter = LlmQueryRewriter(ScriptedChatModel(lambda s, u: None))
    down = await ask(ctx, "l3", question)
    assert down.recall.fallback == "rewriter_failed"
    assert down.recall.query_rewritten == "What was the budget for cloud servers?"
    assert FACTS[0] in recalled_block(down)
    ctx.settings = make_settings(llm={"rewrite_timeout_s": 0.05})
    ctx.query_rewriter = LlmQueryRewriter(ScriptedChatModel(lambda s, u: "x", delay_s=5))
    slow = await ask(ctx, "l3", question)
    # Asked again: the fact is in the block the first answer left in the window, not again.
    assert slow.recall.fallback == "rewriter_failed" and FACTS[0] not in recalled_block(slow)
    assert slow.recall.skipped_reason == "already_in_context"
    assert FACTS[0] in "\n".join(str(m["content"]) for m in slow.messages)
    ctx.query_rewriter = LlmQueryRewriter(ScriptedChatModel(lambda s, u: " \n "))
    blank = await ask(ctx, "l3", question)
    assert blank.recall.fallback == "rewriter_failed"


async def test_a_judging_model_decides_what_is_evidence(ctx: ServiceContext) -> None:
    await archive_facts(ctx, "l4")
    chat = judge_holding("Marta")
    use_judge(ctx, chat)
    result = await recall_query(ctx, DEFAULT_TENANT, "l4", BUDGET_QUESTION, 5)
    assert [FACTS[0] in r.text for r in result.results] == [True]
    assert result.results[0].score == 1.0 and result.fallback is None
    assert chat.prompts[0][1].startswith(f"Question: {BUDGET_QUESTION}\n\nPassages:")


async def test_a_judge_that_finds_no_answer_means_no_match(ctx: ServiceContext) -> None:
    await archive_facts(ctx, "l5")
    use_judge(ctx, judge_holding(None))
    result = await recall_query(ctx, DEFAULT_TENANT, "l5", "What was the cloud server budget?", 5)
    assert result.results == () and result.message == "no match"
    turn = await ask(ctx, "l5", "What was the budget we agreed on for cloud servers?")
    assert turn.recall.no_match and NO_MATCH_LINE in recalled_block(turn)


async def test_a_judge_that_answers_nonsense_hands_back_to_the_floors(ctx: ServiceContext) -> None:
    await archive_facts(ctx, "l6")
    use_judge(ctx, ScriptedChatModel(lambda s, u: "They all look relevant to me! [1, 2]"))
    response = await ask(ctx, "l6", "What was the budget we agreed on for cloud servers?")
    assert response.recall.fallback == "reranker_failed"
    assert FACTS[0] in recalled_block(response)


async def test_the_judge_reads_only_the_best_n(ctx: ServiceContext) -> None:
    await archive_facts(ctx, "l7")
    chat = judge_holding("Marta")
    use_judge(ctx, chat, top_n=2, max_chars=50)
    await recall_query(ctx, DEFAULT_TENANT, "l7", "What was the cloud server budget?", 5)
    shown = passages(chat.prompts[0][1])
    assert len(shown) == 2 and all(len(p) <= 50 for p in shown)


async def test_a_judge_with_a_floor_of_its_own(ctx: ServiceContext) -> None:
    """`min_score` set: a passage scored 10 stays, while the floor of 1.0 is not met by 9."""

    def reply(system: str, user: str) -> str:
        return json.dumps([10 if "Marta" in p else 9 for p in passages(user)])

    await archive_facts(ctx, "l8")
    use_judge(ctx, ScriptedChatModel(reply), min_score=1.0)
    result = await recall_query(ctx, DEFAULT_TENANT, "l8", BUDGET_QUESTION, 5)
    assert len(result.results) == 1 and FACTS[0] in result.results[0].text
