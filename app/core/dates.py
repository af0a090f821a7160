"""Dates named in a question, as a period of time (docs/DESIGN.md §4, time).

Policy: English and Chinese day expressions resolve against the moment the question was asked
(its `created_at`, else now), in that moment's time zone:
- a calendar day: "12 March", "March 12th", "the 3rd of April", "Feb 19", "2026-03-12",
  "3月12日", "三月十二号"; a year may follow ("March 12, 2025"); without one, the most
  recent such day not after the question;
- relative days: "today", "yesterday", "the day before yesterday", "N days ago",
  "last Friday", "今天", "昨天", "前天", "上周五", "上星期五";
The first expression found wins; none: no period.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

MONTHS = {
    name: number
    for number, names in enumerate(
        (
            "january jan",
            "february feb",
            "march mar",
            "april apr",
            "may",
            "june jun",
            "july jul",
            "august aug",
            "september sept sep",
            "october oct",
            "november nov",
            "december dec",
        ),
        start=1,
    )
    for name in names.split()
}
WEEKDAYS_EN = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
WEEKDAYS_ZH = "一二三四五六日"
ZH_DIGITS = {c: i for i, c in enumerate("零一二三四五六七八九")}
SMALL_NUMBERS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}

_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_ORDINAL = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s+(\d{4}))?"
_DAY_MONTH = re.compile(rf"\b{_ORDINAL}\s+(?:of\s+)?({_MONTH})\b\.?{_YEAR}", re.IGNORECASE)
_MONTH_DAY = re.compile(rf"\b({_MONTH})\.?\s+{_ORDINAL}\b{_YEAR}", re.IGNORECASE)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_ZH_NUMBER = r"(\d{1,2}|[一二三四五六七八九十]{1,3})"
_ZH_DAY = re.compile(rf"(?:(\d{{4}})年)?{_ZH_NUMBER}月{_ZH_NUMBER}[日号]")
_DAYS_AGO = re.compile(r"\b(\d+|a|one|two|three|four|five|six) days? ago\b", re.IGNORECASE)
_LAST_WEEKDAY = re.compile(rf"\blast ({'|'.join(WEEKDAYS_EN)})\b", re.IGNORECASE)
_ZH_LAST_WEEKDAY = re.compile(rf"上(?:周|星期|礼拜)([{WEEKDAYS_ZH}天])")
_RELATIVE = (
    (re.compile(r"\bthe day before yesterday\b", re.IGNORECASE), 2),
    (re.compile(r"\byesterday\b", re.IGNORECASE), 1),
    (re.compile(r"\btoday\b", re.IGNORECASE), 0),
    (re.compile("前天"), 2),
    (re.compile("昨天"), 1),
    (re.compile("今天"), 0),
)


@dataclass(frozen=True)
class Period:
    """[start, end): the day (or days) a question asks about, in the asker's time zone."""

    start: datetime
    end: datetime

    def holds(self, moment: datetime) -> bool:
        return self.start <= moment < self.end


def zh_number(text: str) -> int:
    """`12`, `十二`, `二十一`, `三十` → the number."""
    if text.isdigit():
        return int(text)
    if "十" not in text:
        return ZH_DIGITS[text]
    tens, _, ones = text.partition("十")
    return (ZH_DIGITS[tens] if tens else 1) * 10 + (ZH_DIGITS[ones] if ones else 0)


def _day(moment: datetime, day: date) -> Period:
    start = datetime.combine(day, time(0, 0), moment.tzinfo)
    return Period(start, start + timedelta(days=1))


def _calendar(moment: datetime, year: str | None, month: int, day: int) -> Period | None:
    today = moment.date()
    try:
        found = date(int(year) if year else today.year, month, day)
        if not year and found > today:
            found = found.replace(year=today.year - 1)
    except ValueError:  # 31 February, 29 February of a common year
        return None
    return _day(moment, found)


def _weekday_before(moment: datetime, weekday: int) -> Period:
    """The latest day of that weekday strictly before the question's day."""
    back = (moment.weekday() - weekday) % 7 or 7
    return _day(moment, moment.date() - timedelta(days=back))


def _calendar_period(text: str, moment: datetime) -> Period | None:
    if match := _ISO.search(text):
        return _calendar(moment, match[1], int(match[2]), int(match[3]))
    if match := _DAY_MONTH.search(text):
        return _calendar(moment, match[3], MONTHS[match[2].lower()], int(match[1]))
    if match := _MONTH_DAY.search(text):
        return _calendar(moment, match[3], MONTHS[match[1].lower()], int(match[2]))
    if match := _ZH_DAY.search(text):
        return _calendar(moment, match[1], zh_number(match[2]), zh_number(match[3]))
    return None


def _relative_period(text: str, moment: datetime) -> Period | None:
    if match := _DAYS_AGO.search(text):
        count = match[1].lower()
        days = int(count) if count.isdigit() else SMALL_NUMBERS[count]
        return _day(moment, moment.date() - timedelta(days=days))
    if match := _LAST_WEEKDAY.search(text):
        return _weekday_before(moment, WEEKDAYS_EN.index(match[1].lower()))
    if match := _ZH_LAST_WEEKDAY.search(text):
        weekday = 6 if match[1] == "天" else WEEKDAYS_ZH.index(match[1])
        # 上周五: Friday of the previous calendar week (the week starts on Monday).
        monday = moment.date() - timedelta(days=moment.weekday() + 7)
        return _day(moment, monday + timedelta(days=weekday))
    for pattern, days in _RELATIVE:
        if pattern.search(text):
            return _day(moment, moment.date() - timedelta(days=days))
    return None


def period_in(text: str, asked_at: datetime) -> Period | None:
    """The day the question names, if it names one (see the module's policy)."""
    return _calendar_period(text, asked_at) or _relative_period(text, asked_at)
