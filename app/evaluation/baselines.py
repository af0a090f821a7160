"""Context strategies compared by `ebbtide eval` (docs/DESIGN.md §10), behind one interface.

Every strategy receives each turn's new messages and answers with the prompt it would send,
under the same token counter and the same budget (C − r, r as Ebbtide resolves it):
- truncation: the newest messages that fit, the oldest dropped;
- compaction-only: at 80 % of the budget the oldest messages are replaced, down to 65 %, by an
  extractive summary (the same fact and notes rules as Ebbtide's C2), and never come back;
- full RAG: every message embedded as it arrives; each turn the newest messages that fit in
  the budget less B, plus the top-k earlier messages by cosine to the newest user message
  within B tokens; no notes;
- Ebbtide: the service itself, in-process (`run_turn`) or over HTTP.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from app.api.schemas import TurnResponse
from app.core.assemble import notes_block, recalled_block
from app.core.budget import resolve_reserve
from app.core.facts import Fact, SourceMessage, apply, extract
from app.core.formats import openai
from app.core.messages import Message
from app.core.notes import NotesBody, render, update_body
from app.core.plan import session_budget
from app.core.ports import Embedder, EmbedderUnavailable, TokenCounter
from app.core.tokens import PROMPT_OVERHEAD, count_message, count_text_block
from app.core.vectors import cosine
from app.evaluation.scenarios import post
from app.services.context import ServiceContext
from app.services.policies import notes_limits, plan_policy
from app.settings import Settings

STRATEGIES = ("truncation", "compaction", "full_rag", "ebbtide")


@dataclass(frozen=True)
class TurnOutput:
    prompt: list[dict[str, Any]]
    prompt_tokens: int
    injected_tokens: int
    latency_ms: float
    fallback: bool = False
    stages_ms: dict[str, float] = field(default_factory=dict)
    no_match: bool = False  # this turn injected the explicit no-match line


class Strategy(Protocol):
    name: str

    async def turn(self, messages: Sequence[Message]) -> TurnOutput: ...


@dataclass(frozen=True)
class Kit:
    """What a local baseline needs: the same counter, embedder and settings as Ebbtide."""

    counter: TokenCounter
    embedder: Embedder
    settings: Settings


def prompt_size(ctx: Kit, prompt: Sequence[dict[str, Any]]) -> int:
    return PROMPT_OVERHEAD + sum(
        count_message(ctx.counter, openai.read_message(m))
        if m["role"] != "system"
        else count_text_block(ctx.counter, m["content"])
        for m in prompt
    )


def budget_of(ctx: Kit, window: int) -> int:
    settings = ctx.settings.budget
    return window - resolve_reserve(
        window, None, settings.reserve_tokens, settings.reserve_max_fraction
    )


def budget_lines(ctx: Kit, window: int) -> dict[str, float]:
    """What the prompt-tokens plot draws: the window, the budget every strategy must fit
    (window − reserve), and Ebbtide's watermark lines, which are shares of that budget less
    the room kept for recall."""
    rules = plan_policy(ctx.settings)
    ebbtide = session_budget(rules, window, None)
    policy = rules.policy
    return {
        "window": window,
        "budget": budget_of(ctx, window),
        "watermark_base": ebbtide.watermark_base,
        "offload_ratio": policy.offload_ratio,
        "emergency_ratio": policy.emergency_ratio,
        "offload_at": ebbtide.line(policy.offload_ratio),
        "emergency_at": ebbtide.line(policy.emergency_ratio),
    }


@dataclass
class _History:
    """The messages a local baseline has seen, with their token counts."""

    ctx: Kit
    items: list[tuple[Message, int]] = field(default_factory=list)

    def add(self, messages: Sequence[Message]) -> None:
        self.items += [(m, count_message(self.ctx.counter, m)) for m in messages]

    def newest_within(self, tokens: int, start: int = 0) -> list[int]:
        """Indices of the newest messages (from `start` on) that fit in `tokens`."""
        kept: list[int] = []
        used = 0
        for index in range(len(self.items) - 1, start - 1, -1):
            if used + self.items[index][1] > tokens:
                break
            used += self.items[index][1]
            kept.append(index)
        return sorted(kept)


def _output(
    ctx: Kit, prompt: list[dict[str, Any]], started: float, injected: int = 0
) -> TurnOutput:
    return TurnOutput(
        prompt, prompt_size(ctx, prompt), injected, round((time.perf_counter() - started) * 1000, 3)
    )


class Truncation:
    name = "truncation"

    def __init__(self, ctx: Kit, window: int) -> None:
        self.ctx, self.budget, self.history = ctx, budget_of(ctx, window), _History(ctx)

    async def turn(self, messages: Sequence[Message]) -> TurnOutput:
        started = time.perf_counter()
        self.history.add(messages)
        kept = self.history.newest_within(self.budget - PROMPT_OVERHEAD)
        prompt = [openai.as_json(self.history.items[i][0]) for i in kept]
        return _output(self.ctx, prompt, started)


class CompactionOnly:
    name = "compaction"

    def __init__(self, ctx: Kit, window: int) -> None:
        self.ctx, self.budget, self.history = ctx, budget_of(ctx, window), _History(ctx)
        self.start = 0  # messages before this index were compacted away
        self.facts: list[Fact] = []
        self.body = NotesBody()
        self.summary: str | None = None

    def _compact(self, upto: int) -> None:
        sources = [
            SourceMessage(i, i, m.role, m.text)
            for i, (m, _) in enumerate(self.history.items[self.start : upto], self.start)
        ]
        self.facts = apply(self.facts, extract(sources, self.facts))
        limits = notes_limits(self.ctx.settings)
        self.body = update_body(self.body, sources, limits)
        self.summary = render(
            self.body,
            self.facts,
            cap_tokens=self.ctx.settings.notes.cap_tokens,
            count=self.ctx.counter.count,
            limits=limits,
        )
        self.start = upto

    def _size(self) -> int:
        summary = count_text_block(self.ctx.counter, notes_block(self.summary))
        return summary + sum(t for _, t in self.history.items[self.start :])

    def _cut_point(self, target: float) -> int:
        """The first message to keep so that what stays fits in `target` tokens."""
        remaining, upto = self._size(), self.start
        while upto < len(self.history.items) - 1 and remaining > target:
            remaining -= self.history.items[upto][1]
            upto += 1
        return upto

    async def turn(self, messages: Sequence[Message]) -> TurnOutput:
        started = time.perf_counter()
        self.history.add(messages)
        policy = self.ctx.settings.budget
        if self._size() >= policy.offload_ratio * self.budget:
            self._compact(self._cut_point(policy.target_ratio * self.budget))
        summary = [{"role": "system", "content": notes_block(self.summary)}] if self.summary else []
        room = (
            self.budget
            - PROMPT_OVERHEAD
            - count_text_block(self.ctx.counter, notes_block(self.summary))
        )
        kept = self.history.newest_within(room, self.start)
        return _output(
            self.ctx, summary + [openai.as_json(self.history.items[i][0]) for i in kept], started
        )


class FullRag:
    name = "full_rag"

    def __init__(self, ctx: Kit, window: int) -> None:
        self.ctx, self.budget, self.history = ctx, budget_of(ctx, window), _History(ctx)
        self.vectors: list[list[float] | None] = []
        self.fallbacks = 0

    async def _embed(self, messages: Sequence[Message]) -> None:
        texts = [m.text[: self.ctx.settings.embedder.max_chars] for m in messages]
        try:
            self.vectors += list(await self.ctx.embedder.embed_passages(texts))
        except EmbedderUnavailable:
            self.vectors += [None] * len(messages)

    async def turn(self, messages: Sequence[Message]) -> TurnOutput:
        started = time.perf_counter()
        self.history.add(messages)
        await self._embed(messages)
        recall = self.ctx.settings.recall
        recent = self.history.newest_within(self.budget - recall.budget_tokens - PROMPT_OVERHEAD)
        query = next((m.words for m in reversed(messages) if m.role == "user"), None)
        block, injected = "", 0
        if query and recent and recent[0] > 0:
            qvec = await self.ctx.embedder.embed_query(query)
            older = [(cosine(qvec, v), i) for i, v in enumerate(self.vectors[: recent[0]]) if v]
            chosen, used = [], 0
            for _, index in sorted(older, reverse=True)[: recall.top_k]:
                tokens = self.history.items[index][1]
                if used + tokens <= recall.budget_tokens:
                    chosen.append(index)
                    used += tokens
            block = "\n\n".join(self.history.items[i][0].text for i in sorted(chosen))
            injected = count_text_block(self.ctx.counter, recalled_block(block)) if block else 0
        prompt = [openai.as_json(self.history.items[i][0]) for i in recent]
        if block:
            prompt.insert(len(prompt) - 1, {"role": "system", "content": recalled_block(block)})
        return _output(self.ctx, prompt, started, injected)


def _ebbtide_output(response: TurnResponse, started: float) -> TurnOutput:
    """Both Ebbtide strategies read the turn as a client does: the HTTP response body."""
    return TurnOutput(
        prompt=response.messages,
        prompt_tokens=response.usage.prompt_tokens,
        injected_tokens=response.recall.injected_tokens,
        latency_ms=round((time.perf_counter() - started) * 1000, 3),
        fallback=bool(response.recall.fallback or response.offload.fallback),
        stages_ms={k: v for k, v in response.timings_ms.items() if k.startswith("recall_")},
        no_match=response.recall.no_match,
    )


class EbbtideInProcess:
    name = "ebbtide"

    def __init__(self, ctx: ServiceContext, window: int, session_id: str) -> None:
        self.ctx, self.window, self.session_id = ctx, window, session_id

    async def turn(self, messages: Sequence[Message]) -> TurnOutput:
        started = time.perf_counter()
        result = await post(self.ctx, self.session_id, list(messages), context_window=self.window)
        return _ebbtide_output(TurnResponse.model_validate(result), started)


class EbbtideOverHttp:
    name = "ebbtide"

    def __init__(self, client: httpx.AsyncClient, window: int, session_id: str) -> None:
        self.client, self.window, self.session_id = client, window, session_id

    async def turn(self, messages: Sequence[Message]) -> TurnOutput:
        started = time.perf_counter()
        reply = await self.client.post(
            f"/sessions/{self.session_id}/turn",
            json={
                "messages": [openai.as_json(m) for m in messages],
                "context_window": self.window,
            },
        )
        reply.raise_for_status()
        return _ebbtide_output(TurnResponse.model_validate(reply.json()), started)
