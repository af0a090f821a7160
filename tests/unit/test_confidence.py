from __future__ import annotations

import random

from app.core.confidence import ConfidenceWeights, HitFeatures, confidence
from app.evaluation.calibration import FitSettings, HitSample, fit, reliability
from app.settings import Settings

WEIGHTS = Settings(database_url="postgresql://unused").recall.confidence.weights()


def test_confidence_grows_with_margin_lead_and_similarity_and_falls_with_rank() -> None:
    base = HitFeatures(margin=0.05, lead=0.01, similarity=0.85, rank=2)
    surer = (
        HitFeatures(0.10, 0.01, 0.85, 2),
        HitFeatures(0.05, 0.05, 0.85, 2),
        HitFeatures(0.05, 0.01, 0.90, 2),
        HitFeatures(0.05, 0.01, 0.85, 1),
    )
    for features in surer:
        assert confidence(WEIGHTS, features) > confidence(WEIGHTS, base), features
    assert 0 < confidence(WEIGHTS, base) < 1


def test_confidence_stays_within_zero_and_one_at_the_extremes() -> None:
    assert confidence(WEIGHTS, HitFeatures(1e6, 1e6, 1.0, 1)) == 1.0
    assert 0.0 <= confidence(WEIGHTS, HitFeatures(-1e6, 0.0, -1.0, 100)) < 1e-20


def test_a_hit_found_by_words_alone_is_scored_with_the_stand_in_similarity() -> None:
    words_only = HitFeatures(0.05, 0.01, None, 1)
    stand_in = HitFeatures(0.05, 0.01, WEIGHTS.words_only_similarity, 1)
    assert confidence(WEIGHTS, words_only) == confidence(WEIGHTS, stand_in)


def _samples(count: int, seed: int) -> list[HitSample]:
    """Hits whose chance of being right is a known logistic of their margin."""
    truth = ConfidenceWeights(-3.0, 40.0, 0.0, 0.0, 0.0, 0.85)
    rng = random.Random(seed)
    samples = []
    for _ in range(count):
        features = HitFeatures(rng.uniform(-0.05, 0.2), rng.uniform(0, 0.05), 0.85, 1)
        right = rng.random() < confidence(truth, features)
        samples.append(HitSample("chats", "dev", "en", features, right))
    return samples


def test_the_fit_recovers_a_known_model_and_its_reliability_matches() -> None:
    weights = fit(_samples(3000, seed=1), FitSettings(words_only_similarity=0.85, steps=3000))
    assert 30 < weights.margin < 50 and -4 < weights.bias < -2
    table = reliability(_samples(3000, seed=2), weights, bins=5)
    assert sum(row.hits for row in table) == 3000
    for row in table:
        if row.hits >= 100 and row.right is not None:  # a calibrated model: p ≈ share right
            assert row.low - 0.1 <= row.right <= row.high + 0.1, row
