from __future__ import annotations

from itertools import count

import pytest

from app.core.facts import (
    Fact,
    FactChanges,
    FactKind,
    FactStatus,
    SourceMessage,
    apply,
    classify,
    extract,
    options_in,
    referenced_ordinal,
    sentences,
)

_ids = count(100)


def said(text: str, turn: int = 1, role: str = "user") -> SourceMessage:
    return SourceMessage(seq=turn * 10, turn=turn, role=role, text=text)


def stored(changes: FactChanges, before: list[Fact] | None = None) -> list[Fact]:
    """The facts as the store would hold them after `changes`: new ones get ids."""
    after = apply(before or [], changes)
    return [f if f.id is not None else Fact(**{**f.__dict__, "id": next(_ids)}) for f in after]


def active(facts: list[Fact]) -> list[str]:
    return [f.text for f in facts if f.status is FactStatus.ACTIVE]


def test_clauses_split_where_both_carry_a_constraint() -> None:
    assert sentences("只查华东仓，只看缺货商品。客户是王建国，电话 138。") == [
        "只查华东仓",
        "只看缺货商品",
        "客户是王建国，电话 138",
    ]
    assert sentences("Ship from Suzhou, never from Guangzhou. Only A, and only B.") == [
        "Ship from Suzhou, never from Guangzhou",
        "Only A",
        "and only B",
    ]


@pytest.mark.parametrize(
    ("sentence", "kind"),
    [
        ("只查华东仓", FactKind.CONSTRAINT),
        ("Never deploy on Fridays", FactKind.CONSTRAINT),
        ("我更喜欢用表格展示", FactKind.PREFERENCE),
        ("I'd prefer a bar chart", FactKind.PREFERENCE),
        ("等我确认后再导出 CSV", FactKind.PENDING_ACTION),
        ("Wait for my confirmation, then export the CSV", FactKind.PENDING_ACTION),
        ("我们决定用 PostgreSQL", FactKind.DECISION),
        ("Let's go with the blue-green rollout", FactKind.DECISION),
        ("The budget is 12,400 dollars", FactKind.NUMBER),
        ("hello there", None),
        ("ok 1", None),
        ("chat 10 c0 c1 c2", None),
        ("Invoice INV-20931 is overdue", FactKind.NUMBER),
        ("meeting at 9:30", FactKind.NUMBER),
    ],
)
def test_sentences_are_classified_by_their_cue_words(sentence: str, kind: FactKind | None) -> None:
    assert classify(sentence) is kind


def test_a_constraint_is_kept_verbatim_with_its_source() -> None:
    (fact,) = extract([said("Only ship from the Suzhou warehouse.", turn=3)], []).new
    assert fact.kind is FactKind.CONSTRAINT and fact.text == "Only ship from the Suzhou warehouse"
    assert fact.source_turn == 3 and fact.source_seq == 30


def test_a_change_supersedes_the_related_fact_only() -> None:
    facts = stored(extract([said("只查华东仓，只看缺货商品", turn=3)], []))
    changes = extract([said("改成华南仓", turn=9)], facts)
    after = stored(changes, facts)
    assert active(after) == ["只看缺货商品", "改成华南仓（取代：只查华东仓）"]
    ((old_id, by),) = changes.superseded
    assert by == 0 and next(f for f in after if f.id == old_id).text == "只查华东仓"


def test_an_english_change_and_a_cancellation() -> None:
    facts = stored(
        extract(
            [
                said("Only ship from the Suzhou warehouse.", turn=2),
                said("Never use the express carrier.", turn=3),
            ],
            [],
        )
    )
    after = stored(extract([said("Change the warehouse to Ningbo instead.", turn=8)], facts), facts)
    assert (
        "Change the warehouse to Ningbo instead (replaces: Only ship from the Suzhou "
        "warehouse)" in active(after)
    )
    cancelled = stored(
        extract([said("Forget about the express carrier rule.", turn=9)], after), after
    )
    assert all(
        "express carrier." not in t and t != "Never use the express carrier"
        for t in active(cancelled)
    )


def test_no_longer_wanting_something_in_chinese_cancels_it() -> None:
    facts = stored(extract([said("每天发一份日报", turn=2)], []))  # not a fact: no cue
    assert facts == []
    facts = stored(extract([said("必须每天发日报", turn=2)], []))
    after = stored(extract([said("日报不要了", turn=5)], facts), facts)
    assert "必须每天发日报" not in active(after)


def test_options_are_listed_and_a_decision_names_the_one_it_points_at() -> None:
    facts = stored(
        extract(
            [said("方案一：按天统计；方案二：按月汇总；方案三：实时看板", role="assistant")], []
        )
    )
    assert [(f.ordinal, f.text) for f in facts] == [
        (1, "按天统计"),
        (2, "按月汇总"),
        (3, "实时看板"),
    ]
    picked = extract([said("把第二个方案改成按周统计", turn=7)], facts)
    (decision,) = picked.new
    assert decision.kind is FactKind.DECISION and "按月汇总" in decision.text
    assert picked.options_named == [10]  # the list's message, seq 10
    english = stored(
        extract(
            [
                said(
                    "Options:\n1. Daily report\n2. Monthly summary\n3. Live dashboard",
                    role="assistant",
                )
            ],
            [],
        )
    )
    (chosen,) = extract([said("Let's go with the second one.", turn=4)], english).new
    assert chosen.text == "Let's go with the second one (option 2: Monthly summary)"
    relisted = extract([said("1. Alpha\n2. Beta", role="assistant")], english)
    assert len(relisted.superseded) == 3


def test_ordinals_and_lists_are_recognised() -> None:
    assert referenced_ordinal("第2个方案") == 2
    assert referenced_ordinal("方案三怎么样") == 3
    assert referenced_ordinal("option b please") == 2
    assert referenced_ordinal("the third one") == 3
    assert referenced_ordinal("no ordinal here") is None
    assert options_in("1. only one item") == []


def test_a_pending_action_stays_open_until_the_user_confirms() -> None:
    facts = stored(extract([said("等我确认后再导出 CSV", turn=4)], []))
    assert extract([said("好，先看看数据", turn=5)], facts).resolved == []
    assistant_yes = extract([said("Confirmed.", turn=6, role="assistant")], facts)
    assert assistant_yes.resolved == []
    changes = extract([said("确认了，可以导出", turn=7)], facts)
    assert changes.resolved == [facts[0].id]
    assert apply(facts, changes)[0].status is FactStatus.RESOLVED


def test_assistant_sentences_do_not_create_constraints_and_repeats_are_not_duplicated() -> None:
    assert (
        extract([said("You must only use the Suzhou warehouse.", role="assistant")], []).new == []
    )
    facts = stored(extract([said("Only the Suzhou warehouse.")], []))
    assert extract([said("Only the Suzhou warehouse.", turn=4)], facts).new == []


def test_a_fact_changed_in_the_same_batch_is_stored_already_superseded() -> None:
    changes = extract([said("只查华东仓", turn=3), said("改成华南仓", turn=3)], [])
    assert [(f.text, f.status) for f in changes.new] == [
        ("只查华东仓", FactStatus.SUPERSEDED),
        ("改成华南仓（取代：只查华东仓）", FactStatus.ACTIVE),
    ]
    assert referenced_ordinal("第十一个方案") is None


@pytest.mark.parametrize(
    "sentence",
    ["公园里看见有人牵着一只乌龟散步", "我们收养了一只灵缇", "那只猫又来了"],
)
def test_zhi_as_a_measure_word_is_no_constraint(sentence: str) -> None:
    assert classify(sentence) is None


def test_asking_whether_forbids_nothing() -> None:
    assert classify("抽奖环节要不要请主持人？") is None
    assert classify("能不能下周再发货") is None
    assert classify("要不要紧都不要发邮件给客户") is FactKind.CONSTRAINT


def test_zhi_as_only_still_is() -> None:
    assert classify("报表只看缺货商品") is FactKind.CONSTRAINT
    assert classify("这只箱子只能放冷链仓") is FactKind.CONSTRAINT  # 只能 after the measure word


@pytest.mark.parametrize(
    ("sentence", "kind"),
    [
        ("Never email the customer directly", FactKind.CONSTRAINT),
        ("Ship from Suzhou, never from Guangzhou", FactKind.CONSTRAINT),
        ("We only ship from the Suzhou warehouse", FactKind.CONSTRAINT),
        ("Ship only from Suzhou", FactKind.CONSTRAINT),
        ("Use only the blue-green rollout", FactKind.CONSTRAINT),
        ("Please always round prices", FactKind.CONSTRAINT),
        ("So I must renew it before the trip", FactKind.CONSTRAINT),
        ("There was thunder but the storm never quite arrived", None),
        ("I met neighbours I had never spoken to", None),
        ("Flying always makes me anxious", None),
        ("The kids cannot agree on a name", None),
    ],
)
def test_an_english_constraint_binds_someone(sentence: str, kind: FactKind | None) -> None:
    assert classify(sentence) is kind


def test_past_the_bound_the_oldest_facts_of_a_kind_expire_and_others_stay() -> None:
    lines = [said(f"Only ship crate {name} by sea.", turn=t) for t, name in enumerate("ABC")]
    facts = stored(extract(lines, []))
    facts += stored(extract([said("I prefer morning deliveries.", turn=4)], []))
    changes = extract([said("Only ship crate D by sea.", turn=5)], facts, max_active=2)
    after = stored(changes, facts)
    assert active(after) == [
        "Only ship crate C by sea",
        "I prefer morning deliveries",
        "Only ship crate D by sea",
    ]
    expired = [f.text for f in after if f.status is FactStatus.EXPIRED]
    assert expired == ["Only ship crate A by sea", "Only ship crate B by sea"]
    assert sorted(changes.expired) == sorted(f.id for f in facts[:2])


def test_a_fact_of_the_same_batch_past_the_bound_is_stored_expired() -> None:
    lines = [said(f"Never open gate {n}.", turn=n) for n in range(1, 5)]
    changes = extract(lines, [], max_active=3)
    assert [f.status for f in changes.new] == [FactStatus.EXPIRED] + [FactStatus.ACTIVE] * 3
    assert changes.expired == []  # nothing stored to update: the new row is written expired
