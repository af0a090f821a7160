"""Recall's optional LLM help, over the ChatModel port: a query rewrite (the QueryRewriter
port) and a judge that scores candidates (the Reranker port). Both are off unless configured
(EBBTIDE_LLM__REWRITE_QUERIES, EBBTIDE_RERANKER__KIND=llm); the local path is the default.

A model's reply that does not parse is a failure like a timeout: the caller falls back to the
local path and flags it, so a chatty model never breaks a turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from app.core.ports import (
    ChatModel,
    ChatModelUnavailable,
    QueryRewriterUnavailable,
    RerankerUnavailable,
)

REWRITE_RULES = """\
You turn a question about an earlier conversation into a search query over that \
conversation's archive. Reply with one line and nothing else: the question restated so that \
it stands on its own (resolve "it", "that one" from the recent turns), followed by words and \
short phrases the answer itself would likely contain (synonyms, related terms, the kind of \
value asked for). Write in the question's language. Never answer the question."""

JUDGE_RULES = """\
You judge passages from an earlier conversation against a question. Score each passage from \
0 to 10: 10 it states the answer, 5 it is on the subject but does not give the answer, 0 it \
is unrelated. A passage about a similar but different thing scores low. Reply with a JSON \
array of integers only, one per passage, in the passages' order."""

MAX_REWRITE_CHARS = 600  # one line of search words; longer replies are cut here
JUDGE_SCALE = 10  # the rules' 0–10
_ARRAY = re.compile(r"\[[^\[\]]*\]")


class LlmQueryRewriter:
    def __init__(self, chat: ChatModel) -> None:
        self._chat = chat

    async def rewrite(self, question: str, recent: Sequence[str]) -> str:
        context = "\n".join(f"- {text}" for text in recent) or "(none)"
        prompt = f"Recent turns:\n{context}\n\nQuestion: {question}"
        try:
            reply = await self._chat.complete(REWRITE_RULES, prompt)
        except ChatModelUnavailable as error:
            raise QueryRewriterUnavailable(str(error)) from error
        line = next((part.strip() for part in reply.splitlines() if part.strip()), "")
        if not line:
            raise QueryRewriterUnavailable("the chat model returned no rewrite")
        return line[:MAX_REWRITE_CHARS]


def _is_score(value: object) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= JUDGE_SCALE
    )


def parse_judgement(reply: str, count: int) -> list[float]:
    """The scores in the model's reply, 0–1, one per passage; RerankerUnavailable if the reply
    holds no JSON array of `count` numbers on the 0–10 scale."""
    for match in _ARRAY.finditer(reply):
        try:
            values = json.loads(match.group())
        except json.JSONDecodeError:
            continue
        if isinstance(values, list) and len(values) == count and all(_is_score(v) for v in values):
            return [float(v) / JUDGE_SCALE for v in values]
    raise RerankerUnavailable(f"the chat model's judgement is not {count} scores from 0 to 10")


class LlmReranker:
    """Judges candidates with the chat model, all in one call (the passages arrive cut to
    `reranker.max_chars` and at most `reranker.top_n` of them)."""

    def __init__(self, chat: ChatModel) -> None:
        self._chat = chat

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        passages = "\n\n".join(f"[{n}] {text}" for n, text in enumerate(documents, 1))
        prompt = f"Question: {query}\n\nPassages:\n\n{passages}"
        try:
            reply = await self._chat.complete(JUDGE_RULES, prompt)
        except ChatModelUnavailable as error:
            raise RerankerUnavailable(str(error)) from error
        return parse_judgement(reply, len(documents))
