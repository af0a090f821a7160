"""Token accounting: message token formula, the provider × model window table, calibration.

Policy:
- A message costs `MESSAGE_OVERHEAD` tokens of framing plus its content, its name and its
  tool calls (serialised as JSON), following OpenAI's published counting recipe; a prompt
  adds `PROMPT_OVERHEAD` for the assistant priming. Counts are estimates of the provider's
  real tokenizer; the per-session calibration ratio corrects them from observed usage.
- Windows are looked up by exact name first, then by the longest known prefix, after dropping
  a `provider/` prefix. An unknown model has no window: callers must ask for one explicitly
  rather than guess.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from app.core.ports import TokenCounter
from app.core.types import Message

MESSAGE_OVERHEAD = 3
NAME_OVERHEAD = 1
PROMPT_OVERHEAD = 3

# Context windows in tokens. Keys are model names or family prefixes, lower case.
# Sources: the seeds' provider table (2026-05) and the providers' model pages.
MODEL_WINDOWS: dict[str, int] = {
    # OpenAI
    "gpt-5.5": 1_000_000,
    "gpt-5-5": 1_000_000,
    "gpt-5": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    # Anthropic
    "claude-opus-4-7": 1_000_000,
    "claude-opus-4": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4": 200_000,
    "claude-3": 200_000,
    # Alibaba Qwen
    "qwen-turbo": 1_000_000,
    "qwen3.5-plus": 1_000_000,
    "qwen3.6-max": 262_000,
    "qwen3-max": 262_144,
    "qwen3": 131_072,
    "qwen2.5": 131_072,
    "qwen-plus": 131_072,
    "qwen-max": 32_768,
    "qwen-long": 10_000_000,
    # DeepSeek
    "deepseek-v4": 1_000_000,
    "deepseek-chat": 128_000,
    "deepseek-reasoner": 128_000,
    "deepseek-v3": 128_000,
    # Zhipu GLM
    "glm-5": 200_000,
    "glm-4.6": 200_000,
    "glm-4.5": 128_000,
    "glm-4-long": 1_000_000,
    "glm-4": 128_000,
    # Moonshot Kimi
    "kimi-k2.6": 262_144,
    "kimi-k2": 131_072,
    "moonshot-v1-128k": 128_000,
    "moonshot-v1-32k": 32_000,
    "moonshot-v1-8k": 8_000,
    # ByteDance Doubao
    "doubao-seed-2.0": 256_000,
    "doubao-seed-1.6": 256_000,
    "doubao-1-5-pro-256k": 256_000,
    "doubao-1-5-pro-32k": 32_000,
    "doubao-pro-256k": 256_000,
    "doubao-pro-128k": 128_000,
    "doubao-pro-32k": 32_000,
    # Tencent Hunyuan
    "hunyuan-turbos": 256_000,
    "hunyuan-t1": 256_000,
}


def window_for_model(model: str | None) -> int | None:
    """The model's context window, or None when the model is unknown."""
    if not model:
        return None
    name = model.strip().lower().rsplit("/", 1)[-1]
    if name in MODEL_WINDOWS:
        return MODEL_WINDOWS[name]
    best = ""
    for prefix in MODEL_WINDOWS:
        if name.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return MODEL_WINDOWS[best] if best else None


def count_message(counter: TokenCounter, message: Message) -> int:
    """Tokens one message adds to a prompt."""
    tokens = MESSAGE_OVERHEAD
    if message.content:
        tokens += counter.count(message.content)
    if message.name:
        tokens += NAME_OVERHEAD + counter.count(message.name)
    if message.tool_calls:
        calls = [call.model_dump() for call in message.tool_calls]
        tokens += counter.count(json.dumps(calls, ensure_ascii=False))
    if message.tool_call_id:
        tokens += counter.count(message.tool_call_id)
    return tokens


def count_system(counter: TokenCounter, system: str | None, tools: list[Any] | None) -> int:
    """Tokens of C0: the system prompt and the tool schemas sent with every request."""
    tokens = 0
    if system:
        tokens += MESSAGE_OVERHEAD + counter.count(system)
    if tools:
        tokens += counter.count(json.dumps(tools, ensure_ascii=False, sort_keys=True))
    return tokens


def count_text_block(counter: TokenCounter, text: str | None) -> int:
    """Tokens of an extra system block (the scratchpad, the recalled block)."""
    return MESSAGE_OVERHEAD + counter.count(text) if text else 0


def prompt_tokens(parts: Iterable[int]) -> int:
    return PROMPT_OVERHEAD + sum(parts)


def calibrated(estimate: int, ratio: float) -> int:
    """An estimate corrected by the session's observed/estimated ratio."""
    return round(estimate * ratio)


def update_calibration(
    ratio: float, observed: int, estimated: int, *, alpha: float, lower: float, upper: float
) -> float:
    """Moves the ratio toward observed/estimated by an exponential moving average. The sample
    is clamped before it is averaged, so one absurd report (10^30 tokens) moves the ratio by
    at most `alpha` of the range instead of pinning it at a bound."""
    if observed <= 0 or estimated <= 0:
        return ratio
    sample = min(upper, max(lower, observed / estimated))
    return min(upper, max(lower, (1 - alpha) * ratio + alpha * sample))
