"""What a message states: amounts, days, people and organisations, identifiers (C2's key facts).

Policy (docs/DESIGN.md §1, key facts), English and Chinese, one clause at a time:
- Not a statement, no fact: a question (ends with ? / ？, opens with a question word, or
  asks with 吗 / 呢 / 是不是 / 要不要 …), a hypothetical (if / suppose / what if / 如果 /
  要是 …), the words inside quotation marks, and a speaker's anecdote about their own past
  ("I went to Lisbon in 2015", "去年…", "上次…还是…").
- An amount is a number with a currency or a unit ("48,500 euros", "$31,200", "三万二千元",
  "26 pallets", "18%", "千分之二"); its value is normalised ("48500 EUR", "0.2 %"). A bare
  万 amount said of money (预算 / 报价 / 费 …) is in yuan. Ordinals (第三), years and clock
  times are not amounts.
- A day is resolved against the moment the message was said: a calendar day without a year
  is the occurrence nearest to that moment; "next Tuesday" / "下周三" is that day of the
  following week (weeks start on Monday), a bare weekday the next one from today, and a bare
  "the 22nd" / "13号" falls in the month of the last day the conversation named.
- A party is a person or an organisation with a role: a capitalised name ("Priya Raman",
  "Kessler Logistics", "Hotel Almalusa"), a Chinese name after a role cue ("张伟负责报关",
  "由王芳跟进", "对接人是李娜") or an organisation by its suffix (物流 / 科技 / 公司 …) or
  after its role ("供应商选顺丰").
- An identifier is a code that mixes letters and digits (PO-88213, NH212, MSKU 4471902), a
  version (4.12.3) or a file path (deploy/billing/values-prod.yaml).
- The subject of each is the clause's other content words nearest to it ("pilot budget",
  "预算"): a later statement of the same kind about the same subject supersedes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from enum import StrEnum

from app.core.dates import MONTHS, WEEKDAYS_EN, WEEKDAYS_ZH


class StatedKind(StrEnum):
    AMOUNT = "amount"
    DATE = "date"
    PARTY = "party"
    IDENTIFIER = "identifier"
    CHOICE = "choice"  # only a chat model proposes one (app/core/proposed.py); rules decide


@dataclass(frozen=True)
class Stated:
    kind: StatedKind
    subject: str  # what it is of: "pilot budget", "报关"; may be empty
    value: str  # normalised: "48500 EUR", "2027-03-14", "Priya Raman", "PO-88213"
    words: str  # the words said for it: "48,500 euros", "14 March"
    rejected: str = ""  # a choice's alternative not taken


@dataclass
class DayContext:
    """What the conversation set for a bare day: the last day named (its month places "the
    22nd"), and the week a "next Wednesday" of the same sentence named (its Friday)."""

    last_day: date | None = None
    week_of: date | None = None


# ---- numbers -------------------------------------------------------------------------------

_ZH_DIGIT = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"两": 2, "〇": 0}
_ZH_UNIT = {"十": 10, "百": 100, "千": 1000}
_ZH_BIG = {"万": 10_000, "亿": 100_000_000}
ZH_NUMERAL = r"[零〇一二两三四五六七八九十百千万亿]+"
_EN_NUMBER_WORDS = {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
} | {"thirty": 30, "forty": 40, "fifty": 50, "a hundred": 100, "a dozen": 12}
EN_NUMBER_WORD = "|".join(sorted(_EN_NUMBER_WORDS, key=len, reverse=True))


def zh_numeral(text: str) -> int | None:
    """`三万二千` → 32000, `四十八万` → 480000, `两百` → 200, `十八` → 18, and as said:
    `三百五` → 350, `一万二` → 12000 (None: not a numeral)."""
    total, section, digit, last_unit = 0, 0, None, 0
    for char in text:
        if char in _ZH_DIGIT:
            digit = _ZH_DIGIT[char]
            last_unit = 0 if char in "零〇" else last_unit
        elif char in _ZH_UNIT:
            section += (1 if digit is None else digit) * _ZH_UNIT[char]
            digit, last_unit = None, _ZH_UNIT[char]
        elif char in _ZH_BIG:
            total += (section + (digit or 0)) * _ZH_BIG[char]
            section, digit, last_unit = 0, None, _ZH_BIG[char]
        else:
            return None
    if digit is not None and last_unit and text[-2] not in "零〇":
        # a lone digit right after a unit counts in the unit below it: 三百五 is 350
        digit *= last_unit // 10
    return total + section + (digit or 0)


def _number(text: str) -> float:
    """A number the patterns matched: digits (with separators), an English number word or a
    Chinese numeral."""
    text = text.strip().lower()
    if text in _EN_NUMBER_WORDS:
        return float(_EN_NUMBER_WORDS[text])
    if re.fullmatch(ZH_NUMERAL, text):
        return float(zh_numeral(text) or 0)
    return float(text.replace(",", ""))


def _plain(number: float) -> str:
    return f"{number:.6f}".rstrip("0").rstrip(".")


# ---- clauses that state nothing ------------------------------------------------------------

# A question without its mark: an auxiliary first ("Is it true…", "Should we…"), or a
# question word followed by one ("What would it cost…", "How much…"); "When the data is
# ready, export it" opens a condition, not a question.
_QUESTION_OPEN = re.compile(
    r"^(?:so |and |but |ok,? |okay,? |hmm,? )?(?:"
    r"(?:is|are|was|were|do|does|did|can|could|would|should|shall|will|have|has)\s+"
    r"(?:i|we|you|it|he|she|they|there|this|that|the|a|an|our|my|your|their|any|anyone)\b"
    r"|(?:what|how|why|which|who|whom|whose|when|where)(?:'s|\s+(?:is|are|was|were|do|does|"
    r"did|can|could|would|should|will|much|many|long|often|far|about|if|else|kind|sort)\b)"
    r"|any idea|any chance)",
    re.IGNORECASE,
)
_QUESTION_ZH = re.compile(
    r"(吗|呢|么|是不是|要不要|能不能|可不可以|有没有|多少|什么|怎么|哪|几)[？?。.！!]*$"
)
_POLITE_IF = re.compile(
    r"\bif (?:you (?:need|want|like|prefer)|needed|necessary|possible|that helps)\b", re.IGNORECASE
)
_HYPOTHETICAL = re.compile(
    r"\b(?:if|suppose|supposing|what if|in case|imagine|assuming|hypothetically|were we to)\b"
    # 要是 inside 主要是 / 需要是 / 只要是 is "mainly is" / "needs to be" / "as long as": no "if"
    r"|如果|假如|(?<![主需只])要是|万一|假设|倘若",
    re.IGNORECASE,
)
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|「[^」]*」|‘[^’]*’|'[^']{6,}'")
_OWN_PAST = re.compile(
    r"\b(?:i|we)\b[^.!?]*\b(?:last year|years ago|ago|in (?:19|20)\d\d|once|back then|when i was)\b"
    r"|\bi(?:'ve| have) had\b|去年|那年|小时候|上次[^，。]*还是|以前",
    re.IGNORECASE,
)


def is_question(clause: str) -> bool:
    stripped = clause.strip()
    return (
        stripped.endswith(("?", "？"))
        or bool(_QUESTION_OPEN.match(stripped))
        or bool(_QUESTION_ZH.search(stripped))
    )


def is_hypothetical(text: str) -> bool:
    return bool(_HYPOTHETICAL.search(_POLITE_IF.sub(" ", text)))


def states_nothing(sentence: str) -> bool:
    """A question, a sentence opening with a hypothetical, or an anecdote of the speaker's own
    past (a hypothetical later in a sentence takes only its own clause: "250 attendees, maybe
    more if the keynote is announced early")."""
    opening = re.split(r"[,，;；]", sentence, maxsplit=1)[0]
    return is_question(sentence) or is_hypothetical(opening) or bool(_OWN_PAST.search(sentence))


def without_quotes(text: str) -> str:
    return _QUOTED.sub(" ", text)


# ---- amounts -------------------------------------------------------------------------------

_CURRENCY_WORDS = {
    "EUR": r"euros?|eur",
    "USD": r"dollars?|usd|bucks",
    "GBP": r"pounds?|gbp|quid",
    "JPY": r"yen|jpy",
    "CNY": r"yuan|rmb|cny",
}
_CURRENCY_SYMBOL = {"€": "EUR", "$": "USD", "£": "GBP", "¥": "CNY", "￥": "CNY"}
_CURRENCY_ZH = {
    "元": "CNY",
    "块钱": "CNY",
    "块": "CNY",
    "人民币": "CNY",
    "美元": "USD",
    "美金": "USD",
    "欧元": "EUR",
    "英镑": "GBP",
    "日元": "JPY",
}
_UNITS_EN = (
    r"%|percent|per cent|pallets?|containers?|boxes|box|cartons?|crates?|units?|pieces?|items?|"
    r"kg|kgs|kilos?|kilograms?|tons?|tonnes?|lbs?|km|kilometres?|kilometers?|miles?|"
    r"gb|tb|mb|days?|weeks?|months?|hours?|minutes?|seconds?|nights?|people|persons?|"
    r"customers?|users?|attendees?|guests?|orders?|roles?|engineers?|developers?|analysts?|"
    r"seats?|rooms?|licen[cs]es?|servers?|trucks?|shipments?|parcels?|degrees?|requests?|"
    r"tickets?|employees?|staff|heads?|laptops?|devices?|machines?|desks?|chairs?|racks?|"
    r"monitors?|screens?|phones?|printers?|vehicles?|vans?|beds?|tables?"
)
_UNITS_ZH = (
    r"箱|件|台|吨|公斤|千克|克|公里|米|天|周|个月|小时|分钟|秒|晚|人|度|%|％|张|份|套|辆|柜|托|"
    r"(?:GB|TB|MB)(?![A-Za-z])|"
    r"个(?:订单|用户|客户|人|工作日|托盘|集装箱|柜子|账号|项目)"
)
_NUM = rf"(?:\d[\d,]*(?:\.\d+)?|{EN_NUMBER_WORD})"
_MONEY_EN = re.compile(
    rf"(?P<sym>[€$£¥￥])\s?(?P<n1>\d[\d,]*(?:\.\d+)?)\s?(?P<k1>k|m|million|thousand)?\b"
    rf"|\b(?P<n2>\d[\d,]*(?:\.\d+)?)\s?(?P<k2>k|m|million|thousand)?\s?"
    rf"(?P<cur>{'|'.join(_CURRENCY_WORDS.values())})\b",
    re.IGNORECASE,
)
_QUANTITY_EN = re.compile(
    rf"(?<![\w.#-])(?P<n>{_NUM})\s?(?:(?:[a-z-]+\s){{0,2}}?)(?P<unit>{_UNITS_EN})(?![\w-])",
    re.IGNORECASE,
)
_ZH_NUM = rf"(?:\d[\d,]*(?:\.\d+)?|{ZH_NUMERAL})"
_DURATIONS_ZH = frozenset({"天", "周", "个月", "小时", "分钟", "秒", "晚"})
_MONEY_ZH = re.compile(rf"(?P<n>{_ZH_NUM})(?P<big>万|千|百|亿)?(?P<cur>{'|'.join(_CURRENCY_ZH)})")
_BARE_WAN = re.compile(rf"(?P<n>{_ZH_NUM})(?P<big>万)(?![元块美欧英日人])")
# A price said as a bare number right after what it is the price of: 人均预算三百五, 单价七千五.
_BARE_PRICE_ZH = re.compile(
    rf"(?:预算|报价|单价|人均|费用|价格)(?:是|为|定为|大概|约|在)?"
    rf"(?P<n>{ZH_NUMERAL}|\d[\d,]*(?:\.\d+)?)(?![\d万千百亿元块美欧英日人个%％.,\w])"
)
_MONEY_CONTEXT_ZH = re.compile(r"预算|报价|费|价|钱|成本|花了|付|赔|退|收入|工资|薪")
_QUANTITY_ZH = re.compile(rf"(?<!第)(?P<n>{_ZH_NUM})(?P<unit>{_UNITS_ZH})")
_PER_MILLE_ZH = re.compile(rf"(?P<base>千分之|百分之)(?P<n>{_ZH_NUM})")
_RANGE = re.compile(
    rf"(?<![\d.,])(?P<low>\d[\d,]*(?:\.\d+)?|{ZH_NUMERAL})\s?(?:to|-|–|~|到|至)\s?"
    rf"(?P<high>\d[\d,]*(?:\.\d+)?|{ZH_NUMERAL})",
    re.IGNORECASE,
)
_MULTIPLIER = {"k": 1_000, "thousand": 1_000, "m": 1_000_000, "million": 1_000_000}
_ZH_MULTIPLIER = {"万": 10_000, "千": 1_000, "百": 100, "亿": 100_000_000}


def _currency_of(word: str) -> str:
    lowered = word.lower()
    return next(code for code, words in _CURRENCY_WORDS.items() if re.fullmatch(words, lowered))


def _unit_en(unit: str) -> str:
    unit = unit.lower()
    if unit in ("%", "percent", "per cent"):
        return "%"
    return unit


def _amounts(clause: str, cjk: bool) -> list[tuple[int, int, str, str]]:
    """(start, end, value, words) of each amount in a clause, left to right."""
    found: list[tuple[int, int, str, str]] = []
    taken: list[tuple[int, int]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= s or start >= e for s, e in taken)

    def add(start: int, end: int, value: str) -> None:
        if free(start, end):
            taken.append((start, end))
            found.append((start, end, value, clause[start:end].strip()))

    for match in _RANGE.finditer(clause):  # "95,000 to 110,000 pounds": the unit is the end's
        low = _number(match["low"])
        end = [a for a in _amounts(clause[match.start("high") :], cjk) if a[0] == 0]
        if end:
            unit = end[0][2].partition(" ")[2]
            add(match.start(), match.start("high"), f"{_plain(low)} {unit}")
    for match in _MONEY_EN.finditer(clause):
        number = _number(match["n1"] or match["n2"])
        number *= _MULTIPLIER.get((match["k1"] or match["k2"] or "").lower(), 1)
        if match["sym"]:
            code = _CURRENCY_SYMBOL[match["sym"]]
            code = "CNY" if code == "CNY" and cjk else ("JPY" if code == "CNY" else code)
        else:
            code = _currency_of(match["cur"])
        add(match.start(), match.end(), f"{_plain(number)} {code}")
    for match in _MONEY_ZH.finditer(clause):
        number = _number(match["n"])
        number *= _ZH_MULTIPLIER.get(match["big"] or "", 1)
        add(match.start(), match.end(), f"{_plain(number)} {_CURRENCY_ZH[match['cur']]}")
    if _MONEY_CONTEXT_ZH.search(clause):
        for match in _BARE_WAN.finditer(clause):
            number = _number(match["n"])
            add(match.start(), match.end(), f"{_plain(number * 10_000)} CNY")
        for match in _BARE_PRICE_ZH.finditer(clause):
            number = _number(match["n"])
            add(match.start("n"), match.end(), f"{_plain(number)} CNY")
    for match in _PER_MILLE_ZH.finditer(clause):
        share = _number(match["n"]) / (10 if match["base"] == "千分之" else 1)
        add(match.start(), match.end(), f"{_plain(share)} %")
    for match in _QUANTITY_EN.finditer(clause):
        number = _number(match["n"])
        if not _is_year_or_time(clause, match.start("n"), match["n"]):
            add(match.start(), match.end(), f"{_plain(number)} {_unit_en(match['unit'])}")
    for match in _QUANTITY_ZH.finditer(clause):
        number = _number(match["n"])
        unit = match["unit"]
        if match["n"] == "一" and unit not in _DURATIONS_ZH:
            continue  # 一柜疫苗, 一张优惠券: "a", not an amount
        unit = "%" if unit in ("%", "％") else unit.removeprefix("个") if len(unit) > 1 else unit
        add(match.start(), match.end(), f"{_plain(number)} {unit}")
    return sorted(found)


def _is_year_or_time(clause: str, start: int, number: str) -> bool:
    return bool(re.fullmatch(r"(?:19|20)\d\d", number)) or clause[max(0, start - 1) : start] == ":"


# ---- days ----------------------------------------------------------------------------------

_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_WEEKDAY_EN = "|".join(WEEKDAYS_EN)
_ZH_DAY_NUMBER = r"(\d{1,2}|[一二三四五六七八九十]{1,3})"
_DAY_PATTERNS = re.compile(
    rf"(?P<iso>\b\d{{4}}-\d{{2}}-\d{{2}}\b)"
    rf"|\b(?P<dm_day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<dm_month>{_MONTH})\b\.?(?:,?\s+(?P<dm_year>\d{{4}}))?"
    rf"|\b(?P<md_month>{_MONTH})\.?\s+(?P<md_day>\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(?P<md_year>\d{{4}}))?"
    rf"|(?:(?P<zh_year>\d{{4}})年)?(?P<zh_month>{_ZH_DAY_NUMBER})月(?P<zh_day>{_ZH_DAY_NUMBER})[日号]"
    rf"|\b(?:the\s+)?end of (?P<end_month>{_MONTH})\b"
    rf"|(?P<zh_end_month>{_ZH_DAY_NUMBER})月底"
    rf"|\bnext (?P<next_en>{_WEEKDAY_EN})\b"
    rf"|下(?:周|星期|礼拜)(?P<next_zh>[{WEEKDAYS_ZH}天])"
    # a habit ("every Friday", "on Saturday mornings", "每周六") names no day
    rf"|\b(?<!every )(?<!each )(?P<this_en>{_WEEKDAY_EN})\b"
    rf"(?!s\b|\s+(?:mornings|afternoons|evenings|nights)\b)"
    rf"|(?<![上下每])(?:周|星期|礼拜)(?P<this_zh>[{WEEKDAYS_ZH}天])"
    rf"|\bthe (?P<bare_day>\d{{1,2}})(?:st|nd|rd|th)\b(?!\s+(?:of\s+)?(?:{_MONTH})\b)"
    rf"|(?<![月\d])(?P<zh_bare_day>\d{{1,2}})号"
    rf"|(?P<rel>\bday after tomorrow\b|\btomorrow\b|\btoday\b|\btonight\b|后天|明天|今天|今晚|今日)"
    rf"|(?P<due_time>\b(?:due|by|before|until|at)\s+\d{{1,2}}:\d{{2}}\b)",
    re.IGNORECASE,
)
_RELATIVE_DAYS = {
    "today": 0,
    "tonight": 0,
    "今天": 0,
    "今晚": 0,
    "今日": 0,
    "tomorrow": 1,
    "明天": 1,
    "day after tomorrow": 2,
    "后天": 2,
}


def _month_number(token: str) -> int:
    if token.isascii() and token.isalpha():
        return MONTHS[token.lower().rstrip(".")]
    return int(_number(token))


def _nearest(said: date, month: int, day: int) -> date | None:
    """The day of that month and day nearest to `said` (last, this or next year)."""
    options = []
    for year in (said.year - 1, said.year, said.year + 1):
        try:
            options.append(date(year, month, day))
        except ValueError:
            continue
    return min(options, key=lambda d: abs((d - said).days)) if options else None


def _end_of(said: date, month: int) -> date:
    last = date(said.year, month, 28)
    while (last + timedelta(days=1)).month == month:
        last += timedelta(days=1)
    return _nearest(said, month, last.day) or last


def _weekday_in_next_week(said: date, weekday: int) -> date:
    monday = said - timedelta(days=said.weekday()) + timedelta(days=7)
    return monday + timedelta(days=weekday)


def _coming_weekday(said: date, weekday: int, week_of: date | None) -> date:
    if week_of is not None:  # "下周三出发，周五回来": the week already named
        return week_of - timedelta(days=week_of.weekday()) + timedelta(days=weekday)
    return said + timedelta(days=(weekday - said.weekday()) % 7 or 7)


def _zh_weekday(token: str) -> int:
    return 6 if token == "天" else WEEKDAYS_ZH.index(token)


def _resolve(
    m: re.Match[str], said: date, context: DayContext, week_of: date | None
) -> date | None:
    g = m.groupdict()
    if g["iso"]:
        try:
            return date.fromisoformat(g["iso"])
        except ValueError:
            return None
    for day_key, month_key, year_key in (
        ("dm_day", "dm_month", "dm_year"),
        ("md_day", "md_month", "md_year"),
        ("zh_day", "zh_month", "zh_year"),
    ):
        if g[day_key]:
            month, day = _month_number(g[month_key]), int(_number(g[day_key]) or 0)
            if g[year_key]:
                try:
                    return date(int(g[year_key]), month, day)
                except ValueError:
                    return None
            return _nearest(said, month, day)
    if g["end_month"] or g["zh_end_month"]:
        return _end_of(said, _month_number(g["end_month"] or g["zh_end_month"]))
    if g["next_en"]:
        return _weekday_in_next_week(said, WEEKDAYS_EN.index(g["next_en"].lower()))
    if g["next_zh"]:
        return _weekday_in_next_week(said, _zh_weekday(g["next_zh"]))
    if g["this_en"]:
        return _coming_weekday(said, WEEKDAYS_EN.index(g["this_en"].lower()), week_of)
    if g["this_zh"]:
        return _coming_weekday(said, _zh_weekday(g["this_zh"]), week_of)
    if g["bare_day"] or g["zh_bare_day"]:
        anchor = context.last_day or said
        try:
            return anchor.replace(day=int(g["bare_day"] or g["zh_bare_day"]))
        except ValueError:
            return None
    if g["rel"]:
        return said + timedelta(days=_RELATIVE_DAYS[g["rel"].lower()])
    return said  # a clock time due today


# "today" is when the message is said: a fact only as a deadline or an appointment.
_DEADLINE_CUE = re.compile(
    r"\b(?:by|before|until|due|deadline|end of|no later than|at the latest|at \d)|"
    r"前|之前|以前|截止|为止|必须|务必|到期|[点時时]",
    re.IGNORECASE,
)
# Said of what already happened ("the heating broke on Saturday"): not a plan or a deadline.
_PAST_TENSE = re.compile(
    r"\b(?:was|were|did|had|went|broke|came|got|happened|left)\b"
    r"|\b(?:i|we|he|she|they|it|you)\s+\w+ed\b|(?<![算为除不])了(?!解)|过",
    re.IGNORECASE,
)


# A day right after a weekday, which then only names it ("Saturday, the 12th of June").
_DAY_AFTER = re.compile(rf"[\s,，]*(?:the\s+)?(?:{_DAY_PATTERNS.pattern})", re.IGNORECASE)


def _loose(match: re.Match[str]) -> bool:
    """A weekday, a relative day or a clock time: resolved only with more to go on."""
    return any(match[g] for g in ("this_en", "this_zh", "rel", "due_time", "next_en", "next_zh"))


def _days(
    clause: str, said: date, context: DayContext, past: bool
) -> list[tuple[int, int, str, str]]:
    """The days a clause names; `past`: its sentence tells what happened, so a weekday or a
    relative day in it is no plan or deadline."""
    found: list[tuple[int, int, str, str]] = []
    matches = list(_DAY_PATTERNS.finditer(clause))
    anchored = any(not _loose(m) for m in matches)
    for match in matches:
        if _loose(match) and past:
            continue
        if match["rel"] and not _DEADLINE_CUE.search(clause):
            continue
        if match["due_time"] and (anchored or len(matches) > 1):
            continue
        day = _resolve(match, said, context, context.week_of)
        if day is None:
            continue
        if match["next_en"] or match["next_zh"]:
            context.week_of = day
        # "Saturday 23 January": the weekday names the calendar day that follows it.
        if (match["this_en"] or match["this_zh"]) and _DAY_AFTER.match(clause, match.end()):
            continue
        context.last_day = day
        found.append((match.start(), match.end(), day.isoformat(), match.group(0).strip()))
    return found


# ---- parties -------------------------------------------------------------------------------

_ORG_SUFFIX_EN = (
    "Logistics|Freight|Carriers?|Shipping|Transport|Express|Airlines|Airways|Air|Bank|Group|"
    "Holdings|Inc|Ltd|LLC|GmbH|AG|BV|SA|Corp|Corporation|Company|Co|Partners|Consulting|"
    "Solutions|Systems|Technologies|Tech|Labs|Software|Cloud|Dental|Clinic|Hospital|Hotels?|"
    "Resort|Centre|Center|University|College|School|Talent|Recruitment|Robotics|Motors|Foods|"
    "Trading|Electronics|Media|Studios?|Services|Agency|Insurance|Capital|Energy|Pharma|Health|"
    "Airport|Terminal|Networks|Security|Analytics|Industries|Manufacturing|Supplies|Removals|"
    "Movers|Sons"
)
_NAME_WORD = r"[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?"
_ORG_EN = re.compile(
    rf"\b(?:Hotel|Bank of|University of|Port of)\s+{_NAME_WORD}(?:\s+{_NAME_WORD})?"
    rf"|\b(?:{_NAME_WORD}\s+(?:&\s+)?){{1,3}}(?:{_ORG_SUFFIX_EN})\b\.?"
)
_PERSON_EN = re.compile(
    rf"\b(?:(?:Dr|Mr|Mrs|Ms|Prof)\.?\s+)?(?P<name>{_NAME_WORD}(?:\s+{_NAME_WORD}){{1,2}})\b"
)
_NOT_NAME_WORDS = frozenset(
    {m.capitalize() for m in MONTHS}
    | {d.capitalize() for d in WEEKDAYS_EN}
    | set(
        "The A An Our We I Please Let Lets Let's Can Could Would Should Is Are Do Does Did Yes No "
        "Ok Okay Hi Hello Thanks Thank Good Morning Actually Also And But So Then This That These "
        "Those It Its Correction Sorry Great Sure Right Well Oh Ha Haha Lol One Two Three Four "
        "Five After Before Looks Funny Ugh Hmm Maybe Offer Tell Address Our Their His Her My "
        "Your Dear Suppose If For From To In On At By With".split()
    )
)
_ROLE_VERBS_EN = re.compile(
    r"\b(?:handles?|handling|owns?|chairs?|leads?|runs?|manages?|coordinates?|signs?|approves?|"
    r"collects?|will|is|are|was|from|at|in|with|contact|by|to|booked|using|use|switching|"
    r"go with|going with|vendor|supplier|carrier|customer|client|speaker|provider|manager|"
    r"engineer|commander|recruiter|venue|hotel|airline|owner|lead|partner)\b",
    re.IGNORECASE,
)
_ROLE_IS_NAME = re.compile(
    r"\b(?:vendor|supplier|carrier|customer|client|provider|partner|contractor|agency|airline|"
    r"hotel|venue|bank|insurer|recruiter|courier|forwarder|broker|distributor|reseller|host)"
    r"\s+(?:is|was|will be|are)\s+(?P<name>[A-Z][a-z]+(?:[A-Z][a-z]+)?)\b"
)
_ZH_SURNAMES = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程"
    "苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛"
    "郝龚邵万钱严覃武戴莫孔向汤常温康施文牛樊葛邢安齐易乔伍庞颜倪庄聂章鲁岳翟殷詹申欧耿关兰"
    "焦俞左柳甘祝包宁尚符舒阮柯纪梅童凌毕单季裴霍涂成苗谷盛曲翁冉骆蓝路游辛靳管柴蒙鲍华喻祁"
    "蒲房滕屈饶解牟艾尤阳时穆农司卓古吉缪简车项连芦麦褚娄窦戚岑景党宫费卜冷晏席卫米柏宗瞿桂"
    "全佟应臧闵苟邬边卞姬师和仇栾隋商刁沙荣巫寇桑郎甄丛仲虞敖巩明佘池查麻苑迟邝"
)
_ZH_GIVEN = r"[^\W\d_一二三四五六七八九十末天点号月日年的了是和与在负来跟对]"
_ZH_PERSON = rf"(?:[{_ZH_SURNAMES}]{_ZH_GIVEN}{{1,2}}?|小{_ZH_GIVEN}|[{_ZH_SURNAMES}]总)"
_ZH_ROLE_AFTER = r"(?:负责|来写|来做|来|跟进|牵头|统筹|执行|主导|复核|审批|处理|对接|主持|签字|签)"
_ZH_PERSON_ROLE = re.compile(
    rf"(?:由|让|派|请|是|为|找|叫|的)(?P<a>{_ZH_PERSON})(?={_ZH_ROLE_AFTER}|[，。,；;]|$)"
    rf"|(?:^|[，,。；;、\sA-Za-z]|是)(?P<b>{_ZH_PERSON}){_ZH_ROLE_AFTER}"
    rf"|(?:对接人|联系人|负责人|审批人|接口人|对接的)是(?:[\u4e00-\u9fff]{{0,8}}的)?(?P<c>{_ZH_PERSON})(?![\u4e00-\u9fff])"
    rf"|(?:我|和|、)(?P<d>小[\u4e00-\u9fff]|[{_ZH_SURNAMES}]总)(?=[，。,、和]|$)"
    rf"|(?:主管|经理|总监|主任|组长|老师|工程师|同事|专员|负责人|律师|医生)(?P<e>{_ZH_PERSON})"
    rf"(?={_ZH_ROLE_AFTER}|[，。,；;]|$)"
)
_ZH_ORG_SUFFIX = (
    "有限公司|股份公司|集团|公司|物流|快递|科技|贸易|电子|银行|宾馆|酒店|航空|冷运|云|医院|"
    "大学|商贸|实业|网络|软件|传媒|咨询|制造|工厂|仓储|供应链|国旅|旅行社|报关行"
)
_ZH_ORG = re.compile(rf"(?P<org>[\u4e00-\u9fffA-Za-z]{{1,8}}?(?:{_ZH_ORG_SUFFIX}))")
_ZH_ORG_STOP = set("是选用到在的由给和与把被向从让请找派为改换迁续跟对")
_ZH_ORG_ROLE = re.compile(
    r"(?P<role>供应商|承运商|服务商|渠道商|物流商|客户|合作方|代理|厂商|运营商)(?:是|选|选了|为|定为|用|换成|改成)"
    r"(?P<org>[\u4e00-\u9fffA-Za-z]{2,8}?)(?=[，。,；;、]|$|负责|来|的)"
)


def _zh_org_span(clause: str, match: re.Match[str]) -> tuple[int, str] | None:
    """The organisation a suffix ends, cut at the function word before it (是 / 到 / 用 …)."""
    org, start = match["org"], match.start("org")
    cut = max((i for i, char in enumerate(org[:-1]) if char in _ZH_ORG_STOP), default=-1)
    org, start = org[cut + 1 :], start + cut + 1
    if org[0] in "我你他她它这那本贵该每各此":  # 我们公司, 这家酒店: not a name
        return None
    suffix_len = max(len(s) for s in _ZH_ORG_SUFFIX.split("|") if org.endswith(s))
    return (start, org) if len(org) - suffix_len >= 1 and len(org) >= 3 else None


def _parties(clause: str, cjk: bool) -> list[tuple[int, int, str, str]]:
    found: list[tuple[int, int, str, str]] = []
    taken: list[tuple[int, int]] = []

    def add(start: int, value: str) -> None:
        end = start + len(value)
        if all(end <= s or start >= e for s, e in taken):
            taken.append((start, end))
            found.append((start, end, value, value))

    if cjk:
        for match in _ZH_ORG_ROLE.finditer(clause):
            add(match.start("org"), match["org"])
        for match in _ZH_ORG.finditer(clause):
            span = _zh_org_span(clause, match)
            if span:
                add(*span)
        for match in _ZH_PERSON_ROLE.finditer(clause):
            group = next(g for g in ("a", "b", "c", "d", "e") if match[g])
            add(match.start(group), match[group])
        return sorted(found)
    if not _ROLE_VERBS_EN.search(clause):
        return []
    for match in _ORG_EN.finditer(clause):
        words = match.group(0).rstrip(".").split()
        while words and words[0] in _NOT_NAME_WORDS:
            words = words[1:]
        if len(words) >= 2:
            value = " ".join(words)
            add(clause.index(value, match.start()), value)
    for match in _ROLE_IS_NAME.finditer(clause):
        if match["name"] not in _NOT_NAME_WORDS:
            add(match.start("name"), match["name"])
    for match in _PERSON_EN.finditer(clause):
        words = match["name"].split()
        while words and words[0] in _NOT_NAME_WORDS:
            words = words[1:]
        if len(words) >= 2 and not any(w in _NOT_NAME_WORDS for w in words):
            value = " ".join(words)
            add(clause.index(value, match.start("name")), value)
    return sorted(found)


# ---- identifiers ---------------------------------------------------------------------------

_IDENTIFIER = re.compile(
    r"(?<![A-Za-z0-9_/.-])(?:"
    r"[A-Z]{4}\s?\d{7}"  # a container number (ISO 6346)
    r"|(?=[A-Za-z0-9-]*\d)(?=[A-Za-z0-9-]*[A-Z])[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+"  # PO-88213
    r"|(?=[A-Z0-9]*\d)[A-Z][A-Z0-9]{3,}"  # NH212, C8K2P4471, CT88120455
    r"|[A-Z]{2}\d{2,}[A-Z0-9]*"
    r"|[A-Z]{1,4}(?:/\d+){2,}"  # a reference in slashed parts: LB/2027/118
    r"|(?:v)?\d+\.\d+\.\d+"  # a version
    r"|~?/?(?:[\w.-]+/)+[\w.-]+\.[A-Za-z0-9]{1,5}"  # a file path with an extension
    r")(?![A-Za-z0-9_/-])"
)


def _identifiers(clause: str) -> list[tuple[int, int, str, str]]:
    found = []
    for match in _IDENTIFIER.finditer(clause):
        value = match.group(0)
        found.append((match.start(), match.end(), value, value))
    return found


# ---- subjects ------------------------------------------------------------------------------

_SUBJECT_STOP_EN = frozenset(
    "the a an our their his her my your its this that these those is are was were be been "
    "being will would shall should can could may might must to of for on in at by with from "
    "and or but so then also just now about around roughly approximately only we i you they "
    "he she it us them me agreed agree said one change correction actually okay ok well "
    "please it's that's there here has have had do does did up down out over under into "
    "new total full first next last per each".split()
)
_SUBJECT_STOP_ZH = re.compile(
    r"^(?:我们|我|你|他们|他|她|这次|那就|那|就|先|再|也|还|都|一共|大概|总共|另外)|"
    r"(?:定为|定在|定|改成|改为|换成|是|为|要|有|在|到|控制在|不超过|了|的)$"
)


def _subject(clause: str, start: int, end: int, cjk: bool, since: int = 0) -> str:
    """The content words next to a value: between the value before it (`since`) and it,
    else after it."""
    if cjk:
        before = re.split(r"[，,、；;：:]", clause[since:start])[-1]
        for _ in range(3):
            before = _SUBJECT_STOP_ZH.sub("", before.strip())
        if before:
            return before[-8:]
        after = re.split(r"[，,、；;。]", clause[end:])[0]
        return _SUBJECT_STOP_ZH.sub("", after.strip())[:8]
    words = re.findall(r"[A-Za-z][A-Za-z'-]*", clause[since:start])
    kept = [w for w in words if w.lower() not in _SUBJECT_STOP_EN]
    if kept:
        return " ".join(kept[-3:]).lower()
    after = re.findall(r"[A-Za-z][A-Za-z'-]*", clause[end:])
    return " ".join(w for w in after if w.lower() not in _SUBJECT_STOP_EN)[:40].lower()


# ---- the whole ---------------------------------------------------------------------------

_CLAUSE_SPLIT = re.compile(
    r"[;；]|,\s+(?=and\b|but\b|her\b|his\b|their\b|maybe\b|unless\b|if\b)|，(?=[^，]{2,})"
)


def has_cjk(text: str) -> bool:
    return bool(re.search(r"[\u4e00-\u9fff]", text))


def stated_in(sentence: str, said_at: datetime | None, context: DayContext) -> list[Stated]:
    """The amounts, days, parties and identifiers a sentence states (see the policy); with
    no moment to resolve them against (`said_at` None), no days."""
    text = without_quotes(sentence)
    if states_nothing(text):
        return []
    cjk = has_cjk(text)
    said = said_at.date() if said_at is not None else None
    context.week_of = None
    past = bool(_PAST_TENSE.search(text))
    result: list[Stated] = []
    for clause in _CLAUSE_SPLIT.split(text):
        if not clause.strip() or is_question(clause) or is_hypothetical(clause):
            continue
        spans: list[tuple[StatedKind, tuple[int, int, str, str]]] = []
        ids = _identifiers(clause)
        spans += [(StatedKind.IDENTIFIER, s) for s in ids]
        named = _days(clause, said, context, past) if said is not None else []
        days = [d for d in named if not _inside(d, ids)]
        spans += [(StatedKind.DATE, d) for d in days]
        amounts = [a for a in _amounts(clause, cjk) if not _inside(a, ids + days)]
        spans += [(StatedKind.AMOUNT, a) for a in amounts]
        parties = [p for p in _parties(clause, cjk) if not _inside(p, ids)]
        spans += [(StatedKind.PARTY, p) for p in parties]
        since = 0
        for kind, (start, end, value, words) in sorted(spans, key=lambda s: s[1][0]):
            subject = _subject(clause, start, end, cjk, since)
            result.append(Stated(kind, subject, value, words))
            since = end
    return result


def _inside(span: tuple[int, int, str, str], others: list[tuple[int, int, str, str]]) -> bool:
    return any(span[0] < e and span[1] > s for s, e, _, _ in others)


# ---- what words say, for checking a fact proposed by a model (app/core/proposed.py) ---------

_NUMBER_SAID = re.compile(
    rf"\d[\d,]*(?:\.\d+)?|{ZH_NUMERAL}|\b(?:{EN_NUMBER_WORD})\b", re.IGNORECASE
)
_SCALE_WORDS = [*(word + r"\b" for word in _MULTIPLIER), *_ZH_MULTIPLIER]  # those tables' keys
_SCALE_AFTER = re.compile(rf"\s*({'|'.join(_SCALE_WORDS)})", re.IGNORECASE)


def numbers_said(text: str) -> set[float]:
    """Every number the words say, as said and scaled by a multiplier after it ("48,500",
    "48.5k" → 48.5 and 48500, "三万二千" → 32000, "4.5万" → 45000, "two" → 2), and the values
    of the amounts they state ("千分之二" → 0.2)."""
    numbers: set[float] = set()
    for match in _NUMBER_SAID.finditer(text):
        number = _number(match.group().rstrip(","))
        numbers.add(number)
        scale = _SCALE_AFTER.match(text, match.end())
        if scale:
            word = scale.group(1).lower()
            numbers.add(number * (_MULTIPLIER.get(word) or _ZH_MULTIPLIER[word]))
    for _, _, value, _ in _amounts(text, has_cjk(text)):
        numbers.add(float(value.partition(" ")[0]))
    return numbers


def amount_value(text: str) -> str | None:
    """An amount as a model may write it ("48500 EUR", "€48,500", "48,500 euros", "三万二千元"),
    normalised as the rules normalise it ("48500 EUR"); None when it is not one."""
    found = _amounts(text, has_cjk(text))
    if found:
        return found[0][2]
    match = re.fullmatch(r"\s*(\d[\d,]*(?:\.\d+)?)\s*(\S.*?)?\s*", text)
    if match is None:
        return None
    number = _plain(_number(match.group(1)))
    unit = match.group(2) or ""
    return f"{number} {unit}".strip()


def days_named(text: str, said_at: datetime) -> set[str]:
    """The ISO days the words name, resolved against `said_at` as the rules resolve them."""
    return {day for _, _, day, _ in _days(text, said_at.date(), DayContext(), past=False)}
