"""Scripted stand-ins for an LLM on the hard set (docs/RECALL.md, "LLM help"): they know the
set's answers, so they measure what the service makes of a rewrite and a judgement that are
right (is the answer among the candidates at all, does the judgement reach the prompt), not
what any model would do. `error_rate` makes them wrong on that share of their calls (decided
by a hash of the question, so a run repeats).

- The rewriter restates a question in the words of its fact, the answers left out: the best a
  model could guess without having read the conversation. A question it does not know (a twin)
  comes back as it is; so does a question on which it errs.
- The judge scores a passage 1 when it holds one of the question's answers, 0 otherwise. When
  it errs it is taken in the way this set invites: the answer scored 0 and the best passage
  without it (in the fusion order, usually the distractor) scored 1, for a question and for a
  twin alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from app.evaluation.hard_set import HardNeedle, hard_needles
from app.services.context import ServiceContext


def _draw(*parts: str) -> float:
    """A number in [0, 1) fixed by `parts`."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class _Script:
    def __init__(self, needles: Sequence[HardNeedle] | None, error_rate: float) -> None:
        self._needles = {n.question: n for n in (hard_needles() if needles is None else needles)}
        self.error_rate = error_rate
        self.calls = 0

    def needle_for(self, question: str) -> HardNeedle | None:
        """The needle asked about; a reference resolved by the rule rewrite arrives with its
        entities after the question."""
        found = self._needles.get(question)
        if found is None:
            found = next((n for q, n in self._needles.items() if question.startswith(q)), None)
        return found

    def errs(self, *parts: str) -> bool:
        return _draw(*parts) < self.error_rate


class OracleRewriter(_Script):
    """The QueryRewriter port, scripted from the hard set."""

    async def rewrite(self, question: str, recent: Sequence[str]) -> str:
        self.calls += 1
        needle = self.needle_for(question)
        if needle is None or self.errs("rewrite", question):
            return question
        words = " ".join(needle.fact)
        for answer in needle.answer:
            words = words.replace(answer, " ")
        return " ".join(words.split())


class OracleJudge(_Script):
    """The Reranker port as a judging model (scores 0–1), scripted from the hard set."""

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        self.calls += 1
        needle = self.needle_for(query)
        answers = needle.answer if needle is not None else ()
        holds = [any(answer in document for answer in answers) for document in documents]
        if self.errs("judge", query):  # taken in: the answer missed, the best other passage
            wrong = next((n for n, answered in enumerate(holds) if not answered), None)
            holds = [n == wrong for n in range(len(documents))]
        return [1.0 if answered else 0.0 for answered in holds]


LlmHelp = Literal["rewrite", "judge", "both"]
LLM_HELP: tuple[LlmHelp, ...] = ("rewrite", "judge", "both")


def with_oracle(ctx: ServiceContext, help: LlmHelp, error_rate: float = 0.0) -> ServiceContext:
    """`ctx` with the scripted rewriter, the scripted judge (as `reranker.kind = llm` is
    configured: its scores decide evidence), or both."""
    rewriter = OracleRewriter(None, error_rate) if help in ("rewrite", "both") else None
    judge = OracleJudge(None, error_rate) if help in ("judge", "both") else None
    settings = ctx.settings
    if judge is not None:
        reranker = settings.reranker.model_copy(update={"kind": "llm"})
        settings = settings.model_copy(update={"reranker": reranker})
    return replace(ctx, settings=settings, reranker=judge, query_rewriter=rewriter)
