from __future__ import annotations

from app.core.facts import Fact, FactKind, FactStatus, SourceMessage
from app.core.notes import NotesBody, render, scope_words, update_body, weakened
from app.providers.fakes import WhitespaceCounter
from app.services.policies import notes_limits
from app.settings import Settings

COUNT = WhitespaceCounter().count
LIMITS = notes_limits(Settings(database_url="postgresql://unused"))
KEPT = LIMITS.min_content_kept


def said(text: str, turn: int = 1, role: str = "user") -> SourceMessage:
    return SourceMessage(seq=turn, turn=turn, role=role, text=text)


def fact(kind: FactKind, text: str, turn: int = 1, **overrides: object) -> Fact:
    values: dict[str, object] = {
        "kind": kind,
        "text": text,
        "source_turn": turn,
        "source_seq": turn,
    }
    values.update(overrides)
    return Fact(**values)  # type: ignore[arg-type]


def test_the_body_keeps_goal_tasks_and_what_was_done() -> None:
    body = update_body(
        NotesBody(),
        [
            said("Hi! I need to reconcile the Q3 invoices.", 1),
            said("Please export the overdue list as CSV.", 2),
            said("I have exported the overdue list as CSV.", 3, role="assistant"),
            said("Can you also email the summary to finance?", 4),
        ],
        LIMITS,
    )
    assert body.goal == "I need to reconcile the Q3 invoices"
    assert [o["text"] for o in body.open] == ["Can you also email the summary to finance?"]
    assert [d["turn"] for d in body.done] == [3]
    changed = update_body(body, [said("New goal: close the books for October.", 9)], LIMITS)
    assert changed.goal == "New goal: close the books for October"
    assert NotesBody.from_json(changed.to_json()) == changed


def test_notes_render_every_section_in_order() -> None:
    body = NotesBody(
        goal="reconcile invoices",
        done=[{"text": "exported list", "turn": 3}],
        open=[{"text": "email finance", "turn": 4}],
    )
    facts = [
        fact(FactKind.CONSTRAINT, "只查华东仓", 2),
        fact(FactKind.PREFERENCE, "I'd prefer tables", 2),
        fact(FactKind.PENDING_ACTION, "export after confirmation", 5),
        fact(FactKind.DECISION, "use blue-green", 6, role="assistant"),
        fact(FactKind.NUMBER, "budget 12,400", 7),
        fact(FactKind.PENDING_ACTION, "send the CSV", 3, status=FactStatus.RESOLVED),
        fact(FactKind.CONSTRAINT, "old rule", 1, status=FactStatus.SUPERSEDED),
    ]
    text = render(body, facts, cap_tokens=1000, count=COUNT, limits=LIMITS)
    assert text.splitlines()[0] == "[Goal]"
    order = [line for line in text.splitlines() if line.startswith("[")]
    assert order == [
        "[Goal]",
        "[Constraints]",
        "[Open items]",
        "[Decisions]",
        "[Key facts]",
        "[Done]",
    ]
    assert "- 只查华东仓 (turn 2)" in text and "PENDING: export after confirmation" in text
    assert "turn 6, assistant: use blue-green" in text and "confirmed: send the CSV" in text
    assert "old rule" not in text


def test_over_the_cap_done_goes_first_and_constraints_last() -> None:
    body = NotesBody(goal="a goal", done=[{"text": f"done {i}", "turn": i} for i in range(5)])
    facts = [fact(FactKind.CONSTRAINT, f"only rule {i}", i) for i in range(5)]
    full = render(body, facts, cap_tokens=1000, count=COUNT, limits=LIMITS)
    tight = render(body, facts, cap_tokens=COUNT(full) - 6, count=COUNT, limits=LIMITS)
    assert COUNT(tight) <= COUNT(full) - 6
    assert "done 0" not in tight and "only rule 0" in tight
    tiny = render(body, facts, cap_tokens=20, count=COUNT, limits=LIMITS)
    assert COUNT(tiny) <= 20 and "only rule 4" in tiny and "done" not in tiny


def test_the_cap_holds_when_lines_do_not_add_up_to_the_block() -> None:
    def lumpy(text: str) -> int:  # a block costs more than its lines: the estimate is short
        return COUNT(text) + 3 * text.count("\n")

    facts = [fact(FactKind.CONSTRAINT, f"only rule {i}", i) for i in range(8)]
    notes = render(NotesBody(), facts, cap_tokens=30, count=lumpy, limits=LIMITS)
    assert lumpy(notes) <= 30 and "only rule 7" in notes and "only rule 0" not in notes


def test_many_facts_are_cut_to_the_cap_with_each_line_counted_once() -> None:
    calls: list[str] = []

    def counting(text: str) -> int:
        calls.append(text)
        return COUNT(text)

    facts = [fact(FactKind.CONSTRAINT, f"only rule {i}", i) for i in range(400)]
    notes = render(NotesBody(), facts, cap_tokens=100, count=counting, limits=LIMITS)
    assert COUNT(notes) <= 100 and "only rule 399" in notes
    assert len(calls) < 420  # 400 lines and a few headers, not a recount per dropped line


def test_notes_that_drop_or_weaken_a_constraint_are_caught() -> None:
    facts = [
        fact(FactKind.CONSTRAINT, "Only ship from the East-China warehouse"),
        fact(FactKind.CONSTRAINT, "只查华东仓"),
        fact(FactKind.NUMBER, "budget 12,400"),
        fact(FactKind.CONSTRAINT, "never on Fridays", status=FactStatus.SUPERSEDED),
    ]
    faithful = "[Constraints]\n- Only ship from the East-China warehouse\n- 只查华东仓"
    assert weakened(faithful, facts, min_content_kept=KEPT) == []
    softened = "[Constraints]\n- Prefer the East-China warehouse for shipping\n- 只查华东仓"
    assert [f.text for f in weakened(softened, facts, min_content_kept=KEPT)] == [facts[0].text]
    dropped = "[Constraints]\n- Only ship from the East-China warehouse"
    assert [f.text for f in weakened(dropped, facts, min_content_kept=KEPT)] == ["只查华东仓"]
    assert scope_words("只查华东仓，不要华南仓") == ["只", "不要"]
    assert scope_words("Never ship on Fridays") == ["never"]


def test_a_constraint_is_kept_only_with_its_numbers_on_one_line() -> None:
    rule = fact(FactKind.CONSTRAINT, "Only use supplier 3 for region 3")
    assert weakened("- Only use supplier 3 for region 3", [rule], min_content_kept=KEPT) == []
    assert weakened("- Only use supplier 4 for region 4", [rule], min_content_kept=KEPT) == [rule]
    assert weakened("- Only use supplier\n- 3 for region 3", [rule], min_content_kept=KEPT) == [
        rule
    ]


def test_the_same_request_twice_is_one_open_item_and_an_answer_closes_a_question() -> None:
    body = update_body(
        NotesBody(),
        [
            said("Please give me a detailed comparison of the three vendors.", 1),
            said("Please give me a detailed comparison of the 3 vendors.", 2),
            said("Please give me a detailed comparison of the three vendors!", 2),
            said("Please book the flight to Lisbon.", 3),
            said("Which vendors do you mean?", 4, role="assistant"),
            said(
                "Here is the comparison: the three vendors differ mostly in price.",
                5,
                role="assistant",
            ),
            said("Lisbon is lovely in May, the flight is about two hours.", 6, role="assistant"),
        ],
        LIMITS,
    )
    # "3" is no "three": a number tells two items apart; the same words said again do not
    assert [o["turn"] for o in body.open] == [3]
    assert [d["text"] for d in body.done] == [
        "answered: Please give me a detailed comparison of the three vendors",
        "answered: Please give me a detailed comparison of the 3 vendors",
    ]


def test_tasks_told_needed_or_due_are_open_items_and_questions_about_them_are_not() -> None:
    tasks = [
        "Fine, get separate cover for the racks then",
        "Draft the reply to the customer tonight",
        "We're moving the office next month and I need a plan",
        "Morning, the status page needs an update",
        "The claim has to be filed by Friday",
        "Offers should go out by 1 March",
        "年会的事情得开始准备了",
        "新机2月18日之前发出",
        "多收的钱要退给用户",
    ]
    others = [
        "Do we even need a maintenance page, or can we stay read-only?",
        "Should the invoices go out by Friday?",
        "不要发邮件给客户",
        "The refund must go out by 12 February",  # a constraint: kept there word for word
        "Lisbon was lovely in May",
    ]
    body = update_body(
        NotesBody(), [said(t, n) for n, t in enumerate([*tasks, *others], start=1)], LIMITS
    )
    assert [o["text"] for o in body.open] == tasks[-LIMITS.max_open :]
