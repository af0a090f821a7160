"""How likely a recalled chunk is to hold what the query asks: a number in [0, 1] a client
can act on (docs/RECALL.md, "Confidence").

A fused hit's scores are not probabilities: similarities are compressed and shift from query
to query, and a margin means different things at rank 1 and rank 8. A logistic model over
four things the ranking already knows turns them into one:
- `margin`: what the chunk says scores above the query's median candidate;
- `lead`: its score above the next candidate's (a clear first, or one of a crowd);
- `similarity`: its best unit's plain cosine with the query;
- its rank among the candidates.
The weights are fitted on the dev halves of both evaluation sets (`app/evaluation/
calibration.py`), so that of the hits at confidence p about a share p held evidence there;
the test halves' reliability is in docs/RECALL.md. They belong to one embedder (the packaged
e5 model): another embedder needs its own fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ConfidenceWeights:
    bias: float
    margin: float
    lead: float
    similarity: float
    inverse_rank: float
    # A chunk found by its words alone has no cosine: it is scored as if it had this one,
    # about the median similarity of the hits the weights were fitted on.
    words_only_similarity: float

    def without_similarity(self) -> ConfidenceWeights:
        """The same model for an embedder it was not fitted on: another embedder's cosines
        live on another scale, so every hit counts as having the fitted median one and the
        relative features (margin, lead, rank) decide."""
        return replace(
            self,
            bias=self.bias + self.similarity * self.words_only_similarity,
            similarity=0.0,
        )


@dataclass(frozen=True)
class HitFeatures:
    margin: float
    lead: float
    similarity: float | None
    rank: int  # 1-based

    def vector(self, words_only_similarity: float) -> tuple[float, float, float, float]:
        similarity = words_only_similarity if self.similarity is None else self.similarity
        return (self.margin, self.lead, similarity, 1 / self.rank)


def confidence(weights: ConfidenceWeights, features: HitFeatures) -> float:
    """The logistic model's probability that the hit holds evidence."""
    margin, lead, similarity, inverse_rank = features.vector(weights.words_only_similarity)
    z = (
        weights.bias
        + weights.margin * margin
        + weights.lead * lead
        + weights.similarity * similarity
        + weights.inverse_rank * inverse_rank
    )
    return 1 / (1 + math.exp(-max(-60.0, min(60.0, z))))
