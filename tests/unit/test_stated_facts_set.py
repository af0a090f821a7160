"""The stated-facts set (app/evaluation/stated_facts.py): its shape, its scoring, and the
extractor's floors on it (the CI form of `ebbtide eval`'s stated-facts table)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.evaluation.stated_facts import (
    TARGET_KINDS,
    AnnotatedFact,
    ExtractionReport,
    PredictedFact,
    StatedFactsSetError,
    extraction_rows,
    load_set,
    matches,
    score_extraction,
)

SET = load_set()


@pytest.fixture(scope="module")
def report() -> ExtractionReport:
    return score_extraction(SET)


def test_the_set_is_half_chinese_half_english_from_several_domains() -> None:
    messages = {
        lang: [m for c in SET if c.language == lang for m in c.messages] for lang in ("en", "zh")
    }
    assert all(len(m) >= 100 for m in messages.values())
    users = [m for ms in messages.values() for m in ms if m.role == "user"]
    assert len(users) >= 200
    assert sum(1 for m in users if not m.facts) >= 80  # small talk, questions, hypotheticals
    assert {c.domain for c in SET} >= {"logistics", "software", "travel", "support"}
    assert {c.split for c in SET} == {"dev", "test", "holdout"}


# Figures of the extractor when these floors were set (docs/EVAL.md): dev and test were
# looked at while building it; the held-out conversations were measured once, after.
TUNED_FLOOR = {"precision": 0.90, "recall": 0.80}
HOLDOUT_FLOORS = {
    "amount": (0.80, 0.57),
    "date": (0.80, 0.80),
    "party": (1.00, 0.70),
    "identifier": (1.00, 0.87),
    "choice": (1.00, 0.66),
}


@pytest.mark.parametrize("kind", TARGET_KINDS)
def test_precision_and_recall_on_the_sets_the_extractor_was_built_on(
    report: ExtractionReport, kind: str
) -> None:
    dev, test = report.tally(kind, split="dev"), report.tally(kind, split="test")
    dev.add(test)
    assert dev.precision is not None and dev.precision >= TUNED_FLOOR["precision"]
    assert dev.recall is not None and dev.recall >= TUNED_FLOOR["recall"]


@pytest.mark.parametrize("kind", sorted(HOLDOUT_FLOORS))
def test_held_out_figures_do_not_fall(report: ExtractionReport, kind: str) -> None:
    tally = report.tally(kind, split="holdout")
    precision, recall = HOLDOUT_FLOORS[kind]
    assert tally.precision is not None and tally.precision >= precision
    assert tally.recall is not None and tally.recall >= recall


def test_rows_cover_every_split_language_and_kind(report: ExtractionReport) -> None:
    rows = extraction_rows(report)
    assert {(r.split, r.language) for r in rows} >= {("holdout", "zh"), ("all", "all")}
    everything = [r for r in rows if r.split == "all" and r.language == "all"]
    assert sum(r.annotated for r in everything) == sum(
        len(m.facts) for c in SET for m in c.messages
    )


@pytest.mark.parametrize(
    ("annotated", "predicted", "expected"),
    [
        (
            AnnotatedFact("amount", "budget", "48500 EUR"),
            PredictedFact("amount", "", "48500 EUR"),
            True,
        ),
        (
            AnnotatedFact("amount", "budget", "48500 EUR"),
            PredictedFact("amount", "", "48500 USD"),
            False,
        ),
        (
            AnnotatedFact("amount", "boxes", "26 pallets"),
            PredictedFact("amount", "", "26 boxes"),
            True,
        ),
        (
            AnnotatedFact("amount", "boxes", "26 pallets"),
            PredictedFact("amount", "", "27 pallets"),
            False,
        ),
        (AnnotatedFact("amount", "x", "26 pallets"), PredictedFact("amount", "", None), False),
        (AnnotatedFact("date", "due", "2027-03-14"), PredictedFact("date", "", "2027-03-14"), True),
        (
            AnnotatedFact("party", "r", "Amara Singh"),
            PredictedFact("party", "", "Dr. Amara Singh"),
            True,
        ),
        (
            AnnotatedFact("party", "r", "Dr. Amara Singh"),
            PredictedFact("party", "", "Amara Singh"),
            True,
        ),
        (
            AnnotatedFact("identifier", "r", "ThinkPad T14"),
            PredictedFact("identifier", "", ""),
            False,
        ),
        (
            AnnotatedFact("choice", "route", "rail via Duisburg"),
            PredictedFact("choice", "go rail via Duisburg", None),
            True,
        ),
        (
            AnnotatedFact("choice", "route", "rail via Duisburg"),
            PredictedFact("choice", "trucking", None),
            False,
        ),
        (AnnotatedFact("choice", "route", "the"), PredictedFact("choice", "the", None), False),
        (AnnotatedFact("choice", "route", "rail"), PredictedFact("date", "rail", None), False),
    ],
)
def test_matching(annotated: AnnotatedFact, predicted: PredictedFact, expected: bool) -> None:
    assert matches(annotated, predicted) is expected


@pytest.mark.parametrize(
    "text",
    [
        "== only | three | parts\n",
        "== a | en | x | dev\n@ 2027-01-01 10:00 user\nhello\n+ colour | sky | blue\n",
        "== a | en | x | dev\nstray line\n",
        "== a | en | x | dev\n@ 2027-01-01 10:00 tool\nresult\n",
    ],
)
def test_malformed_files_are_refused_with_the_line(tmp_path: Path, text: str) -> None:
    (tmp_path / "bad.txt").write_text(text, encoding="utf-8")
    with pytest.raises(StatedFactsSetError, match=r"bad\.txt:"):
        load_set(tmp_path)


def test_messages_carry_their_moment() -> None:
    first = SET[0].messages[0]
    assert first.said_at.tzinfo is UTC and first.said_at > datetime(2026, 1, 1, tzinfo=UTC)
