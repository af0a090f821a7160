"""Scripted conversations for recall's behaviour (docs/RECALL.md, "Scripted conversations"):
what a user notices, not a ranking figure.

- `code_word`: a secret code word told in the first turn, then weeks of the long chats' small
  talk (text nobody wrote for this), then "What's the secret code word I told you at the
  start?" and questions about topics never discussed (a Kubernetes cluster, a VPN gateway).
  The code word must come back; the never-discussed topics must answer no match.
- `repeating_theme`: a conversation that keeps to one theme and never asks about the past:
  whatever recall injects there is a near-duplicate of what the window holds.
Each in English and Chinese.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from app.core.messages import Message
from app.core.results import TurnResult
from app.evaluation.hard_recall import recall_top
from app.evaluation.hard_set import LANGUAGES, Language
from app.evaluation.long_chats import long_chats
from app.evaluation.scenarios import post
from app.services.context import ServiceContext

CODE_WORDS: dict[Language, str] = {"en": "heliotrope-47", "zh": "青花瓷-47"}
CODE_WORD_TOLD: dict[Language, str] = {
    "en": "Before we start, one thing to keep: the secret code word is {word}. "
    "I'll ask you for it later.",
    "zh": "开始之前先记一件事：我们的暗号是{word}。之后我会问你。",
}
CODE_WORD_ASKED: dict[Language, str] = {
    "en": "What's the secret code word I told you at the start?",
    "zh": "我一开始告诉你的暗号是什么？",
}
NEVER_DISCUSSED: dict[Language, tuple[str, ...]] = {
    "en": (
        "What did we decide about the Kubernetes cluster?",
        "Which VPN gateway did we configure for the office?",
        "What was the invoice number for the steel order?",
    ),
    "zh": (
        "我们关于Kubernetes集群最后怎么定的？",
        "办公室的VPN网关我们配置的是哪一个？",
        "那批钢材订单的发票号是多少？",
    ),
}
ACKNOWLEDGED: dict[Language, str] = {"en": "Noted.", "zh": "好的，记住了。"}


@dataclass(frozen=True)
class Scripted:
    name: str
    language: Language
    turns: list[list[Message]]  # posted one after another
    asked_at: datetime  # when the probes are asked


@dataclass(frozen=True)
class CodeWord(Scripted):
    word: str
    question: str
    never_discussed: tuple[str, ...]


def _chat_turns(language: Language, seed: int, limit: int) -> tuple[list[list[Message]], datetime]:
    """The first long chat of `language` as turns (a turn per message of its first friend,
    the other friend's lines before it as assistant messages), at most `limit` turns, and the
    time of its last message."""
    chat = next(c for c in long_chats(seed) if c.language == language)
    turns: list[list[Message]] = [[]]
    last = chat.messages[0].at
    for said in chat.messages:
        turns[-1].append(Message.of(said.role, said.text, name=said.speaker, created_at=said.at))
        last = said.at
        if said.role == "user":
            if len(turns) == limit:
                break
            turns.append([])
    return [turn for turn in turns if turn], last


def code_word(language: Language, *, turns: int = 160, seed: int = 7) -> CodeWord:
    body, last = _chat_turns(language, seed, turns)
    first_said = body[0][0].created_at or last
    told_at = first_said - timedelta(hours=1)
    word = CODE_WORDS[language]
    opening = [
        Message.of("user", CODE_WORD_TOLD[language].format(word=word), created_at=told_at),
        Message.of("assistant", ACKNOWLEDGED[language], created_at=told_at),
    ]
    return CodeWord(
        name=f"code-word-{language}",
        language=language,
        turns=[opening[:1], [opening[1], *body[0]], *body[1:]],
        asked_at=last + timedelta(days=1),
        word=word,
        question=CODE_WORD_ASKED[language],
        never_discussed=NEVER_DISCUSSED[language],
    )


# One theme, said again and again in other words, never a question about the past.
THEME: dict[Language, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "en": (
        (
            "Spent the morning in the vegetable garden again",
            "Back in the garden after work today",
            "Another long session with the tomato beds",
            "The garden took most of my Saturday",
        ),
        (
            "watered the tomatoes and tied the beans to their canes",
            "pulled weeds between the lettuce rows and mulched the courgettes",
            "pinched out the tomato side shoots and checked the peppers for aphids",
            "turned the compost and spread some over the bean bed",
            "picked a bowl of cherry tomatoes and a few courgettes",
            "fixed the netting over the strawberries so the birds stay off",
        ),
    ),
    "zh": (
        (
            "今天上午又在菜园里忙了一阵",
            "下班后又去菜园看了看",
            "今天又在番茄地里待了很久",
            "周六大半天都耗在菜园里",
        ),
        (
            "给番茄浇了水，把豆角绑到了竹竿上",
            "拔了生菜行间的草，给西葫芦铺了一层覆盖物",
            "掐掉了番茄的侧芽，检查了辣椒有没有蚜虫",
            "翻了翻堆肥，在豆角地里撒了一些",
            "摘了一碗小番茄和几个西葫芦",
            "把草莓上面的防鸟网重新固定好了",
        ),
    ),
}
THEME_REPLY: dict[Language, tuple[str, ...]] = {
    "en": (
        "Sounds like the garden is doing well. The beans should climb fast now.",
        "Nice work. Mulch will keep the soil moist through the warm days.",
        "Good routine. Regular picking keeps the plants producing.",
    ),
    "zh": (
        "听起来菜园长得不错，豆角接下来会爬得很快。",
        "辛苦了，覆盖物能让土壤在热天保持湿润。",
        "好习惯，勤摘能让植株一直结果。",
    ),
}


def repeating_theme(language: Language, *, turns: int = 120, seed: int = 7) -> Scripted:
    rng = random.Random(f"{seed}-{language}")
    openings, chores = THEME[language]
    joiner = ", " if language == "en" else "，"
    end = "." if language == "en" else "。"
    start = datetime(2026, 5, 4, 18, 0, tzinfo=UTC)
    script: list[list[Message]] = []
    for index in range(turns):
        at = start + timedelta(days=index)
        said = rng.choice(openings) + joiner + joiner.join(rng.sample(chores, 2)) + end
        user = Message.of("user", said, created_at=at)
        if script:
            reply = Message.of("assistant", rng.choice(THEME_REPLY[language]), created_at=at)
            script.append([reply, user])
        else:
            script.append([user])
    return Scripted(
        name=f"repeating-theme-{language}",
        language=language,
        turns=script,
        asked_at=start + timedelta(days=turns),
    )


# --- running them ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CodeWordOutcome:
    language: Language
    archived: bool  # the code word had left the window when asked
    recall_rank: int | None  # `POST /recall`: the rank of the first result holding it
    recall_confidence: float | None  # … and that result's confidence
    in_prompt: bool  # the question's turn put it in the prompt
    never_discussed_no_match: int  # of the never-discussed questions, told "no match"
    never_discussed_injected: int  # … whose turn injected recalled items anyway
    never_discussed: int


@dataclass(frozen=True)
class ThemeOutcome:
    language: Language
    turns_after_offload: int  # turns once something was archived
    recalled_tokens_per_turn: float  # this turn's block, on average over those turns
    recall_share_tokens: int  # R
    turns_injecting: int

    @property
    def share_of_r(self) -> float:
        return self.recalled_tokens_per_turn / self.recall_share_tokens


async def _post_all(
    ctx: ServiceContext, session: str, script: Scripted, window: int
) -> list[TurnResult]:
    return [await post(ctx, session, turn, context_window=window) for turn in script.turns]


def _prompt_text(result: TurnResult) -> str:
    return "\n".join(str(m.get("content") or "") for m in result.messages[:-1])


async def run_code_word(
    ctx: ServiceContext, language: Language, window: int, session: str, turns: int = 160
) -> CodeWordOutcome:
    script = code_word(language, turns=turns)
    results = await _post_all(ctx, session, script, window)
    archived = script.word not in _prompt_text(results[-1]) + str(results[-1].messages[-1])
    asked = await recall_top(ctx, session, script.question, script.asked_at)
    holding = [r for r in asked.results if script.word in r.text]
    no_match = injected = 0
    for question in script.never_discussed:
        found = await recall_top(ctx, session, question, script.asked_at)
        no_match += not found.results
    turn = await _ask(ctx, session, script.question, script.asked_at, window)
    for question in script.never_discussed:
        other = await _ask(ctx, session, question, script.asked_at, window)
        injected += bool(other.recall.hits)
    return CodeWordOutcome(
        language=language,
        archived=archived,
        recall_rank=holding[0].rank if holding else None,
        recall_confidence=holding[0].confidence if holding else None,
        in_prompt=script.word in _prompt_text(turn),
        never_discussed_no_match=no_match,
        never_discussed_injected=injected,
        never_discussed=len(script.never_discussed),
    )


async def _ask(
    ctx: ServiceContext, session: str, text: str, at: datetime, window: int
) -> TurnResult:
    question = Message.of("user", text, created_at=at)
    return await post(ctx, session, [question], context_window=window)


async def run_repeating_theme(
    ctx: ServiceContext, language: Language, window: int, session: str, turns: int = 120
) -> ThemeOutcome:
    results = await _post_all(ctx, session, repeating_theme(language, turns=turns), window)
    first_offload = next(i for i, r in enumerate(results) if r.offload.triggered)
    after = results[first_offload + 1 :]
    tokens = [r.recall.injected_tokens for r in after]
    return ThemeOutcome(
        language=language,
        turns_after_offload=len(after),
        recalled_tokens_per_turn=sum(tokens) / len(tokens),
        recall_share_tokens=after[-1].usage.recall_share_tokens,
        turns_injecting=sum(1 for t in tokens if t > 0),
    )


@dataclass(frozen=True)
class ScriptedReport:
    code_word: list[CodeWordOutcome]
    theme: list[ThemeOutcome]


async def run_scripted(
    ctx: ServiceContext,
    window: int,
    tag: str,
    *,
    code_word_turns: int = 160,
    theme_turns: int = 120,
) -> ScriptedReport:
    """Both conversations in both languages, each in a session of its own (`tag` keeps the
    sessions of one run apart)."""
    words = [
        await run_code_word(ctx, lang, window, f"code-{lang}-{tag}", code_word_turns)
        for lang in LANGUAGES
    ]
    themes = [
        await run_repeating_theme(ctx, lang, window, f"theme-{lang}-{tag}", theme_turns)
        for lang in LANGUAGES
    ]
    return ScriptedReport(words, themes)
