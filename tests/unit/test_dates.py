from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from app.core.dates import period_in, zh_number

# Monday 4 May 2026, ten in the morning
ASKED_UTC = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)
BEIJING = timezone(timedelta(hours=8))
ASKED_BEIJING = datetime(2026, 5, 4, 10, 0, tzinfo=BEIJING)


@pytest.mark.parametrize(
    ("question", "day"),
    [
        ("What did I cook on 12 March?", date(2026, 3, 12)),
        ("Which movie did I watch on February 12?", date(2026, 2, 12)),
        ("How did things go on the 16th of February?", date(2026, 2, 16)),
        ("What did I purchase on February 23rd?", date(2026, 2, 23)),
        ("What show did I attend on 19 Feb?", date(2026, 2, 19)),
        ("and on Sept. 3, 2025?", date(2025, 9, 3)),
        ("what happened on 2026-01-07", date(2026, 1, 7)),
        ("What did we agree on 9 December?", date(2025, 12, 9)),  # after today: last year
        ("What did I do yesterday?", date(2026, 5, 3)),
        ("and the day before yesterday?", date(2026, 5, 2)),
        ("anything today?", date(2026, 5, 4)),
        ("what did I say 3 days ago", date(2026, 5, 1)),
        ("what did I say a day ago", date(2026, 5, 3)),
        ("what did I buy last Friday?", date(2026, 5, 1)),
        ("and last Monday?", date(2026, 4, 27)),  # asked on a Monday: a week back
    ],
)
def test_english_days_resolve_against_the_question(question: str, day: date) -> None:
    period = period_in(question, ASKED_UTC)
    assert period is not None
    assert period.start == datetime(day.year, day.month, day.day, tzinfo=UTC)
    assert period.end - period.start == timedelta(days=1)


@pytest.mark.parametrize(
    ("question", "day"),
    [
        ("3月12日我做了什么菜？", date(2026, 3, 12)),
        ("2月16号那天怎么样？", date(2026, 2, 16)),
        ("三月十六日我去看了什么展览？", date(2026, 3, 16)),
        ("二月二十三日我买了什么？", date(2026, 2, 23)),
        ("十二月三十一号呢？", date(2025, 12, 31)),
        ("2025年10月1日", date(2025, 10, 1)),
        ("昨天说的那个", date(2026, 5, 3)),
        ("前天呢", date(2026, 5, 2)),
        ("今天的安排", date(2026, 5, 4)),
        ("上周五买了什么", date(2026, 5, 1)),
        ("上星期一", date(2026, 4, 27)),
        ("上礼拜天", date(2026, 5, 3)),
    ],
)
def test_chinese_days_resolve_in_the_askers_zone(question: str, day: date) -> None:
    period = period_in(question, ASKED_BEIJING)
    assert period is not None
    assert period.start == datetime(day.year, day.month, day.day, tzinfo=BEIJING)
    assert period.holds(period.start + timedelta(hours=23))
    assert not period.holds(period.end)


def test_no_day_named_no_period() -> None:
    for question in ("What is the budget?", "We may go in May", "31 February", "2月30日"):
        assert period_in(question, ASKED_UTC) is None


def test_chinese_numbers() -> None:
    assert [zh_number(t) for t in ("7", "三", "十", "十二", "二十", "三十一")] == [
        7,
        3,
        10,
        12,
        20,
        31,
    ]
