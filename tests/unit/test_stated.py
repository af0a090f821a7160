"""What a message states (app/core/stated.py) and how stated facts live among the key facts."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.core.facts import Fact, FactKind, FactStatus, SourceMessage, apply, extract
from app.core.stated import DayContext, stated_in, zh_numeral

MONDAY = datetime(2027, 2, 1, 9, 0, tzinfo=UTC)  # Monday 1 February 2027


def values(sentence: str, said_at: datetime = MONDAY, context: DayContext | None = None):
    return [(s.kind.value, s.value) for s in stated_in(sentence, said_at, context or DayContext())]


def test_the_issue_s_five_messages_each_keep_what_they_state() -> None:
    assert values(
        "We agreed: the pilot budget is 48,500 euros and the vendor is Kessler Logistics."
    ) == [("amount", "48500 EUR"), ("party", "Kessler Logistics")]
    assert values("Priya Raman handles the customs paperwork; her deadline is 14 March.") == [
        ("party", "Priya Raman"),
        ("date", "2027-03-14"),
    ]
    assert values("预算定为三万二千元，供应商选顺丰，张伟负责报关，截止日期是3月14日。") == [
        ("amount", "32000 CNY"),
        ("party", "顺丰"),
        ("party", "张伟"),
        ("date", "2027-03-14"),
    ]


@pytest.mark.parametrize(
    "sentence",
    [
        "Is the budget really 48,500 euros?",
        "What would it cost if we added a second warehouse?",
        "If Datadog came in under 60k we would consider it.",
        "要是走空运的话大概多少钱",
        "如果全部报废，我们是不是要赔全款",
        'Jonas once told me "the deadline is 14 March" and laughed.',
        "I went to Lisbon in 2015 and spent 300 euros on pastries.",
        "去年买的那批电脑有三台屏幕坏了",
        "Morning! the heating broke on Saturday.",
        "今天食堂的红烧肉太咸了",
        "The bakery now sells cardamom buns on Saturday mornings.",
        "We meet every Friday.",
        "每周六都去游泳",
    ],
)
def test_questions_hypotheticals_quotes_and_anecdotes_state_nothing(sentence: str) -> None:
    assert values(sentence) == []


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("三万二千", 32000),
        ("四十八万", 480000),
        ("两百", 200),
        ("十八", 18),
        ("一万两千", 12000),
        ("八千六百", 8600),
        ("三", 3),
        ("元", None),
    ],
)
def test_chinese_numerals(text: str, number: int | None) -> None:
    assert zh_numeral(text) == number


@pytest.mark.parametrize(
    ("sentence", "value"),
    [
        ("We'll file for the full invoice value, $31,200.", "31200 USD"),
        ("The fee was 3,000 yen, I already paid it.", "3000 JPY"),
        ("The annual cap is 75k dollars.", "75000 USD"),
        ("这一柜疫苗货值四十八万元。", "480000 CNY"),
        ("报价一年十八万", "180000 CNY"),
        ("差异超过千分之二就要上报", "0.2 %"),
        ("灰度先放5%的流量", "5 %"),
        ("Error rate is hovering around 18% of requests.", "18 %"),
        ("The first shipment is 26 pallets of machine parts.", "26 pallets"),
        ("Fourteen people are coming.", "14 people"),
        ("大概影响了1200个订单", "1200 订单"),
        ("盘点期间仓库停止发货一天", "1 天"),
        ("Catering costs ¥500 a head", "500 JPY"),
        ("餐费每人¥80", "80 CNY"),
        ("单价七千五，含税", "7500 CNY"),  # a bare price after what it is the price of
        ("每天大概新增15GB日志", "15 GB"),
        ("We need 40 desks and 6 printers for the new floor.", "40 desks"),
    ],
)
def test_amounts_are_normalised_with_their_unit(sentence: str, value: str) -> None:
    assert ("amount", value) in values(sentence)


def test_mainly_is_no_if() -> None:
    assert values("这期主要是数据迁移，负责人是唐晓") == [("party", "唐晓")]
    assert values("要是超过预算三万元就先停") == []


def test_a_hypothetical_later_in_a_sentence_takes_only_its_clause() -> None:
    assert values("We expect around 250 attendees, maybe more if the keynote is announced.") == [
        ("amount", "250 attendees")
    ]


def test_a_range_gives_both_ends_the_unit() -> None:
    assert values("The salary band is 95,000 to 110,000 pounds.") == [
        ("amount", "95000 GBP"),
        ("amount", "110000 GBP"),
    ]
    assert values("温度应该是2到8度") == [("amount", "2 度"), ("amount", "8 度")]


def test_articles_ordinals_years_and_clock_times_are_no_amounts() -> None:
    assert values("另外送他们一张两百元的优惠券") == [("amount", "200 CNY")]
    assert values("第三次加班") == []
    assert values("We moved in 2019 items") == []


@pytest.mark.parametrize(
    ("sentence", "day"),
    [
        ("Offers should go out by 1 March.", "2027-03-01"),
        ("The cutover window is Saturday 23 January, 02:00 to 04:00 UTC.", "2027-01-23"),
        ("The postmortem is due next Wednesday.", "2027-02-10"),
        ("The claim has to be filed by Friday at the latest.", "2027-02-05"),
        ("We need the contract signed before the end of March.", "2027-03-31"),
        ("理赔材料下周一之前必须交", "2027-02-08"),
        ("今天下班前必须修好", "2027-02-01"),
        ("Send it by tomorrow", "2027-02-02"),
        ("上线时间定在2027年1月28日晚上十点", "2027-01-28"),
        ("The release is 2027-04-28.", "2027-04-28"),
        ("The gala is on Friday, the 14th of May.", "2027-05-14"),
        ("The next update is due at 09:00.", "2027-02-01"),
        ("It's due March 3rd, 2028.", "2028-03-03"),
        ("货款3月底前付清", "2027-03-31"),
    ],
)
def test_days_resolve_against_the_moment_they_were_said(sentence: str, day: str) -> None:
    assert ("date", day) in values(sentence)


def test_a_calendar_day_is_the_occurrence_nearest_the_message() -> None:
    assert values("The audit was on 20 December.") == [("date", "2026-12-20")]


def test_a_bare_day_takes_the_month_the_conversation_last_named() -> None:
    context = DayContext()
    assert values("Arriving on 19 May and leaving on the 22nd.", context=context) == [
        ("date", "2027-05-19"),
        ("date", "2027-05-22"),
    ]
    assert values("Book the dinner on the 20th.", context=context) == [("date", "2027-05-20")]
    assert values("新员工13号入职", context=context) == [("date", "2027-05-13")]


def test_a_weekday_after_next_week_stays_in_that_week() -> None:
    tuesday = datetime(2027, 4, 6, 19, 0, tzinfo=UTC)
    assert values("下周三出发，周五回来。", tuesday) == [
        ("date", "2027-04-14"),
        ("date", "2027-04-16"),
    ]


def test_a_weekday_before_the_calendar_day_it_names_is_no_day_of_its_own() -> None:
    assert values("The gala is on Friday, the 14th of May.") == [("date", "2027-05-14")]
    assert values("Move-in is Sunday the 9th of May, keys on the 7th.") == [
        ("date", "2027-05-09"),
        ("date", "2027-05-07"),
    ]


def test_impossible_days_are_dropped() -> None:
    assert values("Due 31 February.") == []
    assert values("Due 2027-02-30.") == []
    assert values("It is due 30 February 2027.") == []
    assert values("Deliver on the 31st.", datetime(2027, 2, 1, tzinfo=UTC)) == []


@pytest.mark.parametrize(
    ("sentence", "party"),
    [
        ("Lena Fischer is incident commander tonight.", "Lena Fischer"),
        ("The keynote speaker is Dr. Amara Singh from Halcyon Robotics.", "Amara Singh"),
        ("The keynote speaker is Dr. Amara Singh from Halcyon Robotics.", "Halcyon Robotics"),
        ("We booked Hotel Almalusa for the team.", "Hotel Almalusa"),
        ("Our mail provider is Postwerk.", "Postwerk"),
        ("承运商是中冷物流，理赔由王芳跟进。", "中冷物流"),
        ("承运商是中冷物流，理赔由王芳跟进。", "王芳"),
        ("仓库那边的对接人是李娜", "李娜"),
        ("对方联系人是采购部的吴刚。", "吴刚"),
        ("盘点由仓库主管马超负责", "马超"),
        ("一共三个人，我、小王和黄总。", "小王"),
        ("现在是阿里云，合同3月31日到期。", "阿里云"),
        ("Thanks Priya Raman handles it", "Priya Raman"),
        ("Thanks Kessler Logistics is the vendor", "Kessler Logistics"),
        ("方案由产品部的许晴统筹", "许晴"),
        ("上线由SRE顾铭执行", "顾铭"),
        ("这次的旅行社是康辉旅行社", "康辉旅行社"),
        ("The movers are Pickford & Sons Removals.", "Pickford & Sons Removals"),
    ],
)
def test_parties_with_their_role(sentence: str, party: str) -> None:
    assert ("party", party) in values(sentence)


def test_names_without_a_role_and_pronoun_organisations_are_not_parties() -> None:
    assert values("Grafana Cloud, Datadog and Honeycomb made the shortlist.") == []
    assert values("我们公司楼下新开了一家咖啡店") == []
    assert values("下周三出发，周五回来。") == [("date", "2027-02-10"), ("date", "2027-02-12")]


@pytest.mark.parametrize(
    ("sentence", "identifier"),
    [
        ("booked under order PO-88213", "PO-88213"),
        ("Container MSKU 4471902 arrived", "MSKU 4471902"),
        ("flight NH212", "NH212"),
        ("We're rolling back to release 4.12.3", "4.12.3"),
        (
            "The config lives in deploy/billing/values-prod.yaml if you need it.",
            "deploy/billing/values-prod.yaml",
        ),
        ("订单号SO-20270222-07", "SO-20270222-07"),
        ("账号是AB12345", "AB12345"),
        ("The permit ref is WP/2026/4471.", "WP/2026/4471"),
    ],
)
def test_identifiers(sentence: str, identifier: str) -> None:
    assert ("identifier", identifier) in values(sentence)


def test_subjects_are_the_words_before_the_value_else_after() -> None:
    found = stated_in("预算定为三万二千元", MONDAY, DayContext())
    assert [s.subject for s in found] == ["预算"]
    found = stated_in("About 2,300 customers are affected.", MONDAY, DayContext())
    assert found[0].subject == "affected"
    found = stated_in("ENT-30981", MONDAY, DayContext())
    assert found[0].subject == ""


def said(seq: int, text: str, when: datetime = MONDAY) -> SourceMessage:
    return SourceMessage(seq, seq, "user", text, when)


def numbered(facts: list[Fact], start: int = 1) -> list[Fact]:
    return [Fact(**{**f.__dict__, "id": start + i}) for i, f in enumerate(facts)]


def test_a_later_statement_about_the_same_subject_supersedes() -> None:
    first = numbered(extract([said(1, "预算定为三万二千元，供应商选顺丰。")], []).new)
    later = extract([said(2, "预算改成三万五千元，老板批了。")], first)
    assert [(f.kind, f.value) for f in later.new] == [(FactKind.AMOUNT, "35000 CNY")]
    assert later.superseded == [(first[0].id, 0)]
    after = apply(first, later)
    active = [f.value for f in after if f.status is FactStatus.ACTIVE]
    assert active == ["顺丰", "35000 CNY"]


def test_money_never_supersedes_a_count_and_one_message_never_supersedes_itself() -> None:
    first = numbered(extract([said(1, "The budget is 5,000 euros.")], []).new)
    later = extract([said(2, "The budget covers 12 pallets, 6 pallets each way.")], first)
    assert later.superseded == []
    assert [f.value for f in later.new] == ["12 pallets", "6 pallets"]


def test_the_same_value_of_the_same_subject_is_stated_once() -> None:
    first = numbered(extract([said(1, "The vendor is Kessler Logistics.")], []).new)
    again = extract([said(2, "Reminder: the vendor is Kessler Logistics.")], first)
    assert again.new == []


def test_a_stated_change_makes_no_decision_besides() -> None:
    first = numbered(extract([said(1, "The budget is 5,000 euros.")], []).new)
    later = extract([said(2, "Change the budget to 6,000 euros.")], first)
    assert [f.kind for f in later.new] == [FactKind.AMOUNT]


def test_a_bare_day_in_a_later_turn_takes_the_month_of_the_facts() -> None:
    first = numbered(extract([said(1, "Arriving on 19 May.")], []).new)
    later = extract([said(2, "Book the dinner on the 20th.")], first)
    assert [f.value for f in later.new] == ["2027-05-20"]
    broken = [Fact(**{**first[0].__dict__, "value": "someday"})]
    assert [f.value for f in extract([said(2, "Book it on the 20th.")], broken).new] == [
        "2027-02-20"
    ]


def test_stated_facts_come_from_the_user_only_and_questions_decide_nothing() -> None:
    reply = SourceMessage(1, 1, "assistant", "The invoice says 31,200 USD.", MONDAY)
    assert extract([reply], []).new == []
    assert extract([said(2, "What if we hired one senior and two juniors instead?")], []).new == []


@pytest.mark.parametrize(
    ("sentence", "kind"),
    [
        ("We'll refund to the card rather than issue a credit note.", FactKind.DECISION),
        ("那还是走陆运，不走空运。", FactKind.DECISION),
        ("我们先临时解锁，不强制改密码。", FactKind.DECISION),
        ("我更喜欢坐高铁，不想坐飞机。", FactKind.PREFERENCE),
        ("I'd rather do a cooking class than the boat trip.", FactKind.PREFERENCE),
        ("那只猫又来了", None),
    ],
)
def test_choices_without_a_decision_word(sentence: str, kind: FactKind | None) -> None:
    kinds = [f.kind for f in extract([said(1, sentence)], []).new]
    assert kinds == ([kind] if kind else [])


def test_a_clock_time_beside_a_day_is_that_day_not_today() -> None:
    assert values("The cutover is on 23 January at 02:00.") == [("date", "2027-01-23")]


def test_facts_without_a_subject_never_supersede_and_a_code_is_no_number_fact() -> None:
    first = numbered(extract([said(1, "ENT-30981")], []).new)
    later = extract([said(2, "ENT-30982")], first)
    assert later.superseded == []
    overdue = extract([said(3, "Invoice INV-20931 is overdue")], []).new
    assert [(f.kind, f.value) for f in overdue] == [(FactKind.IDENTIFIER, "INV-20931")]


def test_a_constraint_said_again_in_other_words_is_one_fact_but_crate_a_is_not_crate_c() -> None:
    told = "Never email the customer directly about refunds or invoices."
    once = numbered(extract([said(1, told)], []).new)
    again = extract([said(2, told.replace("invoices.", "invoices again."))], once)
    assert again.new == []
    first = numbered(extract([said(1, "Only ship crate A by sea.")], []).new)
    other = extract([said(3, "Only ship crate C by sea.")], first)
    assert [f.text for f in other.new] == ["Only ship crate C by sea"]


def test_without_a_moment_no_day_is_resolved() -> None:
    found = stated_in("The budget is 5,000 euros, due 14 March.", None, DayContext())
    assert [(s.kind.value, s.value) for s in found] == [("amount", "5000 EUR")]
