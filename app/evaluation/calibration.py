"""Fitting recall's confidence (`app/core/confidence.py`) and checking it (docs/RECALL.md).

Every question of both sets goes to the recall use case (the body of `POST /recall`, top 10
within the largest budget), as their own evaluations ask it; each hit returned becomes a
sample: its features and whether it held evidence (long chats: an evidence message's text is
in it; hard set: a needle's answer is in it, and a twin's hits never are). The logistic
model is fitted on the dev halves of both sets together; the test halves give the
reliability table: of the hits at each confidence, the share that were right.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from app.core.confidence import ConfidenceWeights, HitFeatures, confidence
from app.core.results import RecallResult
from app.evaluation.chats_recall import ChatsConfig, run_chats
from app.evaluation.hard_recall import HardConfig, run_pressure
from app.evaluation.hard_set import HardNeedle
from app.evaluation.long_chats import ChatQuestion
from app.services.context import ServiceContext

SetName = Literal["chats", "hard"]
Split = Literal["dev", "test"]


@dataclass(frozen=True)
class HitSample:
    set_name: SetName
    split: Split
    language: str
    features: HitFeatures
    right: bool


def samples_of(
    result: RecallResult,
    right: Sequence[bool],
    *,
    set_name: SetName,
    split: Split,
    language: str,
) -> list[HitSample]:
    """One sample per hit of `result` (best first), `right[i]` telling whether the i-th held
    evidence."""
    return [
        HitSample(
            set_name,
            split,
            language,
            HitFeatures(hit.margin, hit.lead, hit.vector_score, hit.rank),
            is_right,
        )
        for hit, is_right in zip(result.results, right, strict=True)
    ]


@dataclass(frozen=True)
class FitSettings:
    words_only_similarity: float
    steps: int = 20000
    learning_rate: float = 0.5


def fit(samples: Sequence[HitSample], settings: FitSettings) -> ConfidenceWeights:
    """Logistic regression by gradient descent on standardised features (a few thousand
    samples of four features: no solver needed), answered in the features' own units."""
    x = np.array([s.features.vector(settings.words_only_similarity) for s in samples])
    y = np.array([s.right for s in samples], dtype=float)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    constant = scale < 1e-9  # a feature that never varies here says nothing: weight 0
    scale[constant] = 1.0
    standard = np.where(constant, 0.0, (x - mean) / scale)
    z = np.hstack([standard, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    for _ in range(settings.steps):
        p = 1 / (1 + np.exp(-z @ w))
        w -= settings.learning_rate * z.T @ (p - y) / len(y)
    natural = np.where(constant, 0.0, w[:-1] / scale)
    bias = float(w[-1] - (natural * mean).sum())
    margin, lead, similarity, inverse_rank = (float(v) for v in natural)
    return ConfidenceWeights(
        bias=bias,
        margin=margin,
        lead=lead,
        similarity=similarity,
        inverse_rank=inverse_rank,
        words_only_similarity=settings.words_only_similarity,
    )


@dataclass(frozen=True)
class ReliabilityBin:
    low: float
    high: float
    hits: int
    right: float | None  # the share of those hits that held evidence


def reliability(
    samples: Sequence[HitSample], weights: ConfidenceWeights, bins: int = 10
) -> list[ReliabilityBin]:
    """Hits by confidence, in `bins` equal ranges: how many, and the share right."""
    scored = [(confidence(weights, s.features), s.right) for s in samples]
    table = []
    for index in range(bins):
        low, high = index / bins, (index + 1) / bins
        inside = [right for p, right in scored if low <= p < high or (high == 1 and p == 1)]
        share = sum(inside) / len(inside) if inside else None
        table.append(ReliabilityBin(low, high, len(inside), share))
    return table


async def collect(ctx: ServiceContext) -> list[HitSample]:
    """Every archived question of the long chats (full form) and of the hard set at 3× of
    8,000 (questions and twins), asked through the recall use case: a sample per hit."""
    samples: list[HitSample] = []

    def chat_seen(
        question: ChatQuestion, language: str, result: RecallResult, evidence: Sequence[str]
    ) -> None:
        right = [any(said in hit.text for said in evidence) for hit in result.results]
        samples.extend(
            samples_of(result, right, set_name="chats", split=question.split, language=language)
        )

    def hard_seen(needle: HardNeedle, twin: bool, result: RecallResult) -> None:
        right = [
            not twin and any(answer in hit.text for answer in needle.answer)
            for hit in result.results
        ]
        samples.extend(
            samples_of(
                result, right, set_name="hard", split=needle.split_name, language=needle.language
            )
        )

    await run_chats(ctx, ChatsConfig(), seen=chat_seen)
    hard = HardConfig(window=8000, pressures=(3,))
    await run_pressure(ctx, hard, 3, with_references=False, seen=hard_seen)
    return samples
