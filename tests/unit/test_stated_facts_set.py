"""The stated-facts set (app/evaluation/stated_facts.py): its shape, its scoring, and the
extractor's floors on it (the CI form of `ebbtide eval`'s stated-facts table)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.evaluation.facts_oracle import HEADROOM_SPLITS, HELPERS, FactsOracle, headroom_rows
from app.evaluation.report import proposed_facts_table
from app.evaluation.stated_facts import (
    OPEN_TASK,
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
    assert {c.split for c in SET} == {"dev", "test", "holdout", "holdout2"}


# Figures of the extractor when these floors were set (docs/EVAL.md): dev and test were
# looked at while building it. The first held-out split was measured once (amount 0.80 /
# 0.57, date 0.80 / 0.80, party 1.00 / 0.70, identifier 1.00 / 0.88, choice 1.00 / 0.67),
# then its errors were read on 2026-12-06: these floors are its figures after that.
TUNED_FLOOR = {"precision": 0.90, "recall": 0.80}
HOLDOUT_FLOORS = {
    "holdout": {
        "amount": (0.85, 0.85),
        "date": (1.00, 1.00),
        "party": (1.00, 1.00),
        "identifier": (1.00, 1.00),
        "choice": (1.00, 0.66),
    },
    # The second held-out split, written before those changes and measured once after them
    # (one bug it showed, 要是 read as "if" inside 主要是, fixed: parties 0.90 / 0.60 ->
    # 0.91 / 0.67).
    "holdout2": {
        "amount": (0.88, 0.80),
        "date": (0.81, 0.75),
        "party": (0.90, 0.66),
        "identifier": (1.00, 0.90),
        "choice": (1.00, 0.75),
    },
}


@pytest.mark.parametrize("kind", TARGET_KINDS)
def test_precision_and_recall_on_the_sets_the_extractor_was_built_on(
    report: ExtractionReport, kind: str
) -> None:
    dev, test = report.tally(kind, split="dev"), report.tally(kind, split="test")
    dev.add(test)
    assert dev.precision is not None and dev.precision >= TUNED_FLOOR["precision"]
    assert dev.recall is not None and dev.recall >= TUNED_FLOOR["recall"]


@pytest.mark.parametrize(
    ("split", "kind"),
    [(split, kind) for split, floors in HOLDOUT_FLOORS.items() for kind in floors],
)
def test_held_out_figures_do_not_fall(report: ExtractionReport, split: str, kind: str) -> None:
    tally = report.tally(kind, split=split)
    precision, recall = HOLDOUT_FLOORS[split][kind]
    assert tally.precision is not None and tally.precision >= precision
    assert tally.recall is not None and tally.recall >= recall


def test_rows_cover_every_split_language_and_kind(report: ExtractionReport) -> None:
    rows = extraction_rows(report)
    assert {(r.split, r.language) for r in rows} >= {("holdout", "zh"), ("all", "all")}
    everything = [r for r in rows if r.split == "all" and r.language == "all"]
    assert sum(r.annotated for r in everything) == sum(
        1 for c in SET for m in c.messages for f in m.facts if f.kind != OPEN_TASK
    )


def test_open_tasks_are_marked_in_both_languages_and_are_no_stated_facts(
    report: ExtractionReport,
) -> None:
    tasks = [(c.language, f) for c in SET for m in c.messages for f in m.facts if f.kind == "open"]
    assert {language for language, _ in tasks} == {"en", "zh"} and len(tasks) >= 20
    assert all(score.kind != OPEN_TASK for score in report.scores)


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


# ---- a chat model's proposed facts: the headroom, measured with a scripted model ----------
# (app/evaluation/facts_oracle.py: it knows the set's answers). Figures when this was written
# (docs/EVAL.md): never wrong, recall of every target kind 0.97-1.00 on the whole set; wrong on
# a tenth of the messages, 21 made-up facts proposed and none kept.


@pytest.fixture(scope="module")
def with_oracle() -> tuple[ExtractionReport, FactsOracle]:
    oracle = FactsOracle(SET)
    return score_extraction(SET, oracle.reply), oracle


@pytest.fixture(scope="module")
def with_wrong_oracle() -> tuple[ExtractionReport, FactsOracle]:
    oracle = FactsOracle(SET, error_rate=0.1)
    return score_extraction(SET, oracle.reply), oracle


@pytest.mark.parametrize("kind", TARGET_KINDS)
def test_a_right_model_fills_what_the_rules_miss_and_costs_no_precision(
    report: ExtractionReport, with_oracle: tuple[ExtractionReport, FactsOracle], kind: str
) -> None:
    helped, rules = with_oracle[0].tally(kind), report.tally(kind)
    assert helped.recall is not None and rules.recall is not None
    assert helped.recall >= max(rules.recall, 0.95)
    assert helped.precision is not None and rules.precision is not None
    assert helped.precision >= rules.precision


def test_a_right_model_loses_only_facts_its_words_do_not_say(
    with_oracle: tuple[ExtractionReport, FactsOracle],
) -> None:
    helped, _ = with_oracle
    # "fifteen grand" (no multiplier "grand"), 两大一小 for three people: numbers not said;
    # "Monday evening", "Saturday night" of a trip: days whose date the words do not say
    assert len(helped.kept) >= 250 and len(helped.dropped) <= 4


def test_made_up_facts_never_pass_the_check(
    with_wrong_oracle: tuple[ExtractionReport, FactsOracle],
) -> None:
    helped, oracle = with_wrong_oracle
    dropped = {(p.fact.kind.value, p.fact.value) for p in helped.dropped}
    assert len(oracle.invented) >= 10
    assert all(made_up in dropped for made_up in oracle.invented)
    # facts taken from messages that state none pass where the message is a plain statement
    assert oracle.unstated


def test_the_eval_report_shows_the_headroom_beside_the_rules_alone() -> None:
    rows = headroom_rows(SET)
    table = proposed_facts_table({"proposed_facts": [asdict(r) for r in rows]})
    helpers = [line.split(" | ")[0].strip("| ") for line in table[2:] if line]
    assert helpers == [h for h, _ in HELPERS for _ in HEADROOM_SPLITS]
    wrong = [r for r in rows if r.helper.endswith("10 %")]
    assert wrong[0].made_up >= 10 and wrong[0].made_up_kept == 0
    assert table[-2].endswith(f"| 0 of {wrong[0].made_up} |")
