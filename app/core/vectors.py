"""Vector helpers on plain float sequences: what chunking, recall and the baselines share.

A zero vector has no direction: its cosine with anything is 0, and its mean stays zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    norm = math.sqrt(dot(a, a)) * math.sqrt(dot(b, b))
    return dot(a, b) / norm if norm else 0.0


def mean_vector(vectors: Sequence[Sequence[float]]) -> list[float]:
    """The unit-length mean: the vector of a chunk made of several embedded units."""
    summed = [sum(values) for values in zip(*vectors, strict=True)]
    norm = math.sqrt(sum(v * v for v in summed)) or 1.0
    return [v / norm for v in summed]
