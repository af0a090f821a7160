"""Deterministic conversations with planted facts, for the needle tests and `ebbtide eval`.

A scenario is a list of turns (messages to post) followed by questions, each question
naming the planted sentence it needs. Half the facts are Chinese, half English; some
questions go through references ("刚才说的那个仓库", "the budget we agreed on").
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from app.core.assemble import NOTES_HEADER, RECALL_HEADER
from app.core.lexical import term_set
from app.core.messages import Message
from app.core.plan import TurnInput
from app.core.results import TurnResult
from app.services.context import ServiceContext
from app.services.embedding_queue import drain
from app.services.turns import run_turn
from app.store.models import DEFAULT_TENANT


@dataclass(frozen=True)
class Needle:
    fact: str
    question: str


NEEDLES: tuple[Needle, ...] = (
    Needle(
        "The cloud server budget is capped at 12,400 dollars per quarter.",
        "What was the budget we agreed on for the cloud servers?",
    ),
    Needle(
        "We ship only from the Suzhou warehouse, never from Guangzhou.",
        "Which warehouse did we say orders ship from?",
    ),
    Needle(
        "The customer's account manager is Priya Raman.",
        "Who is the account manager for this customer?",
    ),
    Needle(
        "Invoice INV-20931 is overdue by 45 days.",
        "Which invoice is overdue, and by how many days?",
    ),
    Needle(
        "The partner API rate limit is 350 requests per minute.",
        "What rate limit did we set earlier for the partner API?",
    ),
    Needle(
        "The deploy freeze starts on December 18 at 17:00 UTC.",
        "When does the deploy freeze start?",
    ),
    Needle(
        "Database passwords are rotated every 30 days.",
        "How often are the database passwords rotated?",
    ),
    Needle(
        "The payments service rollout uses a blue-green deployment.",
        "Which rollout strategy did we pick for the payments service?",
    ),
    Needle(
        "Carrier NorthLine accepts pallets of at most 820 kg.",
        "What was that weight limit for NorthLine we discussed?",
    ),
    Needle(
        "The meeting with the Osaka supplier moved to Thursday at 9:30.",
        "When is the meeting with the Osaka supplier now?",
    ),
    Needle("只查华东仓的库存，不要包含华南仓。", "刚才说的那个仓库是哪个？只查哪个仓？"),
    Needle("项目预算上限是八十五万元。", "我们之前定的项目预算上限是多少？"),
    Needle("新版首页的主色调定为墨绿色。", "新版首页的主色调用什么颜色？"),
    Needle("客户联系人是王建国，电话是 138-0013-4567。", "客户联系人王建国的电话是多少？"),
    Needle("退款申请必须在七天内处理完毕。", "退款申请要在几天内处理完？"),
    Needle("发布会定在三月十二日下午两点，地点在杭州。", "发布会在哪里举行，什么时候？"),
    Needle("测试环境的数据库端口改成了 6543。", "测试环境数据库的端口是多少？"),
    Needle("每周五下午四点做代码评审。", "代码评审安排在每周什么时候？"),
    Needle("供应商合同编号是 HT-2026-0088。", "上次提到的供应商合同编号是什么？"),
    Needle("冷链仓库温度必须保持在二到八摄氏度之间。", "前面说的冷链仓库温度要求是多少度？"),
)

# Questions about things never said: nothing may be injected, and a reference question gets
# the explicit no-match line instead.
NEVER_SAID: tuple[str, ...] = (
    "What is the name of the CEO's dog?",
    "Which hotel did we book earlier for the trip?",
    "What was the discount code we agreed on?",
    "我们之前说的那个会议室是哪间？",
    "上次提到的快递单号是多少？",
)

FILLER_EN = (
    "I tried a new sourdough recipe this weekend and the crust came out darker than expected.",
    "The hiking trail near the lake was muddy after the rain, so we turned back early.",
    "My neighbour keeps tomatoes and basil on the balcony and they grow surprisingly well.",
    "We watched an old science fiction film about a colony ship drifting between stars.",
    "The football match went to extra time and the home team scored with a late header.",
    "I am learning to play a few jazz standards on the piano, slowly and with many mistakes.",
    "The museum had a quiet room of maps drawn by sailors centuries ago.",
    "A friend recommended a podcast about the history of typefaces and printing.",
    "The bakery on the corner now sells cardamom buns on Saturday mornings.",
    "We spent the evening sorting old photographs into albums by year.",
    "The cat discovered the cardboard box and refused to leave it all afternoon.",
    "Cycling to the coast took longer than planned because of the headwind.",
    "I replaced the strings on my guitar and it finally stays in tune.",
    "The library book club is reading a long novel about a family of lighthouse keepers.",
    "Our running group meets at dawn and finishes with coffee by the river.",
)
FILLER_ZH = (
    "周末去爬山，山顶的风景很好，就是下山的时候腿有点酸。",
    "昨天晚上试着做了红烧肉，味道还不错，就是有点偏甜。",
    "楼下新开了一家面馆，牛肉面的汤头很浓。",
    "最近在读一本关于古代航海的书，里面的地图很有意思。",
    "小区里的桂花开了，晚上散步的时候特别香。",
    "孩子开始学游泳了，第一节课还有点怕水。",
    "这周末打算去看一场话剧，听说演员都很出色。",
    "阳台上种的薄荷长得很快，可以用来泡茶。",
    "早上跑步的时候看到河边有很多人在钓鱼。",
    "朋友推荐了一部纪录片，讲的是深海里的生物。",
    "家里的老相册整理了一下，翻到很多小时候的照片。",
    "最近天气转凉，晚上睡觉要盖厚一点的被子了。",
    "周日去博物馆看了青铜器展览，人特别多。",
    "学了几首吉他曲子，手指还是不太灵活。",
    "下雨天在家煮了一锅热汤，感觉很舒服。",
)


@dataclass(frozen=True)
class Scenario:
    turns: list[list[Message]]
    questions: list[Needle]


def _filler(rng: random.Random, sentences: int) -> str:
    pool = FILLER_EN if rng.random() < 0.5 else FILLER_ZH
    return " ".join(rng.choice(pool) for _ in range(sentences))


def needle_scenario(*, turns: int, seed: int = 7, sentences_per_message: int = 5) -> Scenario:
    """`turns` turns of small talk with the needles planted in the first two thirds (one per
    user message while there are turns enough, several per message in short conversations),
    then one question per needle, in shuffled order."""
    rng = random.Random(seed)
    slots = range(min(2, turns - 1), max(3, turns * 2 // 3))
    planted_at = sorted(rng.sample(slots, min(len(NEEDLES), len(slots))))
    needle_at: dict[int, list[Needle]] = {}
    for index, needle in enumerate(NEEDLES):
        needle_at.setdefault(planted_at[index % len(planted_at)], []).append(needle)
    script: list[list[Message]] = []
    for t in range(turns):
        messages = []
        if t:
            messages.append(Message.of("assistant", _filler(rng, sentences_per_message // 2 + 1)))
        text = _filler(rng, sentences_per_message)
        for needle in needle_at.get(t, []):
            text = f"{text} {needle.fact} {_filler(rng, 1)}"
        messages.append(Message.of("user", text))
        script.append(messages)
    questions = list(NEEDLES)
    rng.shuffle(questions)
    return Scenario(turns=script, questions=questions)


async def post(
    ctx: ServiceContext, session_id: str, messages: list[Message], **turn_fields: Any
) -> TurnResult:
    """One turn of a scenario through the real pipeline, as the development tenant. The
    embedding queue is drained after it, as the worker of a server does between the turns of
    a conversation (a model's reply takes longer than embedding a turn's chunks): what the
    eval measures is recall once the worker has caught up."""
    result = await run_turn(
        ctx,
        TurnInput(
            session_id=session_id, tenant_id=DEFAULT_TENANT, messages=messages, **turn_fields
        ),
    )
    if result.offload.triggered or result.offload.oversize_chunk_ids:
        await drain(ctx)
    return result


@dataclass(frozen=True)
class NeedleResult:
    needle: Needle
    in_block: bool  # a recalled block in the prompt quotes the fact
    in_notes: bool  # the notes in the prompt hold every content term of the fact
    top1: bool
    injected_tokens: int
    timings_ms: dict[str, float]

    @property
    def in_prompt(self) -> bool:
        """The model is shown the fact: recall brings back only what the prompt lacks, so a
        fact the notes keep is not quoted again (core.injection)."""
        return self.in_block or self.in_notes


_ITEM_HEADER = re.compile(r"^\[[^\]|]+\| turn \d+-\d+ \| (ck_\w+)\]$", re.MULTILINE)


def block_items(prompt: list[dict[str, Any]]) -> dict[str, str]:
    """chunk_id → injected text, read back from every recalled block of an assembled OpenAI
    prompt (this turn's, and the earlier turns' the window still holds)."""
    items: dict[str, str] = {}
    for message in prompt:
        content = message.get("content")
        if message["role"] == "system" and str(content).startswith(RECALL_HEADER):
            parts = _ITEM_HEADER.split(str(content))
            items.update({parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)})
    return items


def notes_text(prompt: list[dict[str, Any]]) -> str:
    """The notes of an assembled OpenAI prompt ("" when it carries none)."""
    return "\n".join(
        str(m.get("content"))
        for m in prompt
        if m["role"] == "system" and str(m.get("content")).startswith(NOTES_HEADER)
    )


async def replay_needles(
    ctx: ServiceContext, session_id: str, scenario: Scenario, **turn_fields: Any
) -> list[NeedleResult]:
    """Posts the scenario through the real turn pipeline and asks every question."""
    for messages in scenario.turns:
        await post(ctx, session_id, messages, **turn_fields)
    results = []
    for needle in scenario.questions:
        question = Message.of("user", needle.question)
        result = await post(ctx, session_id, [question], **turn_fields)
        items = block_items(result.messages)
        hits = sorted(result.recall.hits, key=lambda hit: -hit.score)
        best = items.get(hits[0].chunk_id, "") if hits else ""
        results.append(
            NeedleResult(
                needle=needle,
                in_block=any(needle.fact in text for text in items.values()),
                in_notes=term_set(needle.fact) <= term_set(notes_text(result.messages)),
                top1=needle.fact in best,
                injected_tokens=result.recall.injected_tokens,
                timings_ms={k: v for k, v in result.timings_ms.items() if k.startswith("recall")},
            )
        )
    return results


# The task-continuity conversation: constraints, changes, pending actions and confirmations
# spread through long small talk (docs/DESIGN.md §10).
TASK_CONSTRAINTS = (
    ("只查华东仓的库存", "改成华南仓的库存"),
    ("Only include invoices from 2026", None),
    ("报表只看缺货商品", None),
    ("Never email the customer directly", None),
    ("预算不超过五十万元", "预算改成六十万元"),
    ("Only use the blue-green rollout for payments", None),
    ("必须在周五前交付", None),
    ("Always round prices to two decimals", "Change the rounding to whole dollars instead"),
)
TASK_GOAL = "目标是整理第三季度的库存报表"
TASK_DONE = (
    "I have exported the stock list for the East region",
    "已完成华东仓的盘点报表",
    "I have sent the summary to the finance team",
)
TASK_OPTIONS = "方案一：按天统计；方案二：按月汇总；方案三：实时看板"
TASK_PICK = ("把第二个方案改成按周统计", "按月汇总")  # the decision, and what it must still name
TASK_PENDING = (
    ("等我确认后再导出 CSV", "确认了，可以导出"),
    ("Wait for legal to confirm, then send the contract", "Confirmed, go ahead and send it"),
    ("等财务确认后再付款", "财务已确认，可以付款"),
)


@dataclass(frozen=True)
class TaskEvent:
    turn: int
    kind: str  # constraint | change | pending | confirm | goal | done | options | pick
    text: str
    replaces: str | None = None

    @property
    def by_assistant(self) -> bool:
        return self.kind in ("done", "options")


@dataclass(frozen=True)
class TaskScenario:
    turns: list[list[Message]]
    events: list[TaskEvent]

    def active_constraints(self, turn: int) -> list[str]:
        """Constraint texts a correct scratchpad shows after `turn` (changes replace)."""
        active: list[str] = []
        for event in self.events:
            if event.turn > turn:
                break
            if event.kind == "constraint":
                active.append(event.text)
            elif event.kind == "change":
                active = [c for c in active if c != event.replaces] + [event.text]
        return active

    def _latest(self, kind: str, turn: int) -> TaskEvent | None:
        return next((e for e in reversed(self.events) if e.kind == kind and e.turn <= turn), None)

    def expected_texts(self, turn: int) -> dict[str, str]:
        """What else a correct scratchpad holds after `turn`: the goal, the latest thing
        done, and the content of the option the user's decision points at."""
        expected = {}
        for kind in ("goal", "done"):
            event = self._latest(kind, turn)
            if event is not None:
                expected[kind] = event.text
        pick = self._latest("pick", turn)
        if pick is not None and pick.replaces is not None:
            expected["reference"] = pick.replaces
        return expected

    def open_pending(self, turn: int) -> list[str]:
        open_items: list[str] = []
        for event in self.events:
            if event.turn > turn:
                break
            if event.kind == "pending":
                open_items.append(event.text)
            elif event.kind == "confirm" and event.replaces in open_items:
                open_items.remove(event.replaces)
        return open_items


def _task_events(turns: int) -> list[TaskEvent]:
    events: list[TaskEvent] = []
    every = max(2, turns // (len(TASK_CONSTRAINTS) + 2))
    for index, (text, change) in enumerate(TASK_CONSTRAINTS):
        events.append(TaskEvent(turn=1 + index * every, kind="constraint", text=text))
        if change is not None:
            events.append(
                TaskEvent(
                    turn=1 + index * every + every // 2, kind="change", text=change, replaces=text
                )
            )
    gap = max(2, turns // (len(TASK_PENDING) + 1))
    for index, (pending, confirm) in enumerate(TASK_PENDING):
        events.append(TaskEvent(turn=3 + index * gap, kind="pending", text=pending))
        events.append(
            TaskEvent(
                turn=3 + index * gap + gap // 2, kind="confirm", text=confirm, replaces=pending
            )
        )
    events.append(TaskEvent(turn=0, kind="goal", text=TASK_GOAL))
    for index, done in enumerate(TASK_DONE):
        events.append(TaskEvent(turn=10 + index * gap, kind="done", text=done))
    events.append(TaskEvent(turn=turns // 5, kind="options", text=TASK_OPTIONS))
    events.append(
        TaskEvent(turn=turns // 5 + every, kind="pick", text=TASK_PICK[0], replaces=TASK_PICK[1])
    )
    return sorted(events, key=lambda e: e.turn)


def task_scenario(*, turns: int, seed: int = 11) -> TaskScenario:
    """`turns` turns of small talk carrying a goal, constraints and their changes, pending
    actions and confirmations, work reported done, and a list of options with a later
    decision that points at one by its ordinal."""
    rng = random.Random(seed)
    events = [e for e in _task_events(turns) if e.turn < turns]
    script: list[list[Message]] = []
    for t in range(turns):
        said = {True: _filler(rng, 2), False: _filler(rng, 3)}
        for event in (e for e in events if e.turn == t):
            stop = "." if event.text.isascii() else "。"
            joiner = "\n" if event.kind == "options" else " "
            said[event.by_assistant] += f"{joiner}{event.text}{stop}"
        messages = [Message.of("assistant", said[True])] if t else []
        messages.append(Message.of("user", said[False]))
        script.append(messages)
    return TaskScenario(turns=script, events=events)


@dataclass(frozen=True)
class NotesCheck:
    turn: int
    tokens: int
    constraints_expected: int
    constraints_kept: int
    open_expected: int
    open_kept: int


async def replay_task(
    ctx: ServiceContext, session_id: str, scenario: TaskScenario, **turn_fields: Any
) -> list[NotesCheck]:
    """Posts the task conversation; at every turn whose notes were rendered again, checks
    which of the constraints and open pending actions a correct scratchpad holds are in it."""
    checks = []
    for turn, messages in enumerate(scenario.turns):
        notes = (await post(ctx, session_id, messages, **turn_fields)).notes
        if not notes.updated:
            continue
        text = notes.text or ""
        constraints = scenario.active_constraints(turn)
        pending = scenario.open_pending(turn)
        checks.append(
            NotesCheck(
                turn=turn,
                tokens=ctx.counter.count(text),
                constraints_expected=len(constraints),
                constraints_kept=sum(c in text for c in constraints),
                open_expected=len(pending),
                open_kept=sum(f"PENDING: {p}" in text for p in pending),
            )
        )
    return checks
