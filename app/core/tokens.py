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
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from app.core.formats.openai import call_arguments_json
from app.core.messages import Media, Message, Opaque, Part, Reasoning, Refusal, Text, ToolResult
from app.core.ports import TokenCounter

MESSAGE_OVERHEAD = 3
NAME_OVERHEAD = 1
PROMPT_OVERHEAD = 3
# Media, by the providers' published rules (docs/TOKENS.md). OpenAI: an image fits 2048 × 2048,
# then its short side 768, and costs 85 plus 170 per 512-pixel tile (85 at low detail).
# Anthropic: an image shrinks to a long edge of 1568 and 1.15 megapixels, and costs its pixels
# over 750. An image whose size is unknown (a link) is taken as 1024 × 1024.
OPENAI_IMAGE_BASE, OPENAI_IMAGE_TILE, OPENAI_TILE_PIXELS = 85, 170, 512
OPENAI_IMAGE_FIT, OPENAI_SHORT_SIDE = 2048, 768
ANTHROPIC_LONG_EDGE, ANTHROPIC_MAX_PIXELS, ANTHROPIC_PIXELS_PER_TOKEN = 1568, 1_150_000, 750
UNKNOWN_IMAGE_SIZE = (1024, 1024)
AUDIO_TOKENS_PER_SECOND = 10  # estimate: about one token per 100 ms of speech
PDF_PAGE_TOKENS = 1500  # a page's text and its picture, the low end of Anthropic's range
FILE_BYTES_PER_TOKEN = 4  # any other file: its text, about four bytes a token
MIN_MEDIA_TOKENS = 85
MediaRule = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class MediaFacts:
    """What a counter could read of a payload (None: unknown)."""

    size: tuple[int, int] | None = None  # an image's pixels
    seconds: float | None = None  # a clip's length
    pages: int | None = None  # a PDF's pages


@dataclass(frozen=True)
class ModelWindow:
    """A model's total context window (prompt and reply) and, where the provider caps the
    prompt below it, the prompt's own limit."""

    total: int
    max_input: int | None = None

    @property
    def prompt_limit(self) -> int:
        """What a prompt may hold: the budget's C (the reply's room is the reserve r)."""
        return self.max_input if self.max_input is not None else self.total


def _w(total: int, max_input: int | None = None) -> ModelWindow:
    return ModelWindow(total, max_input)


# Keys are model names or family prefixes, lower case. Kept by hand, with the providers' model
# pages as the source (2026-05 seed table, then 2026-12): no maintained map ships on its own
# (LiteLLM's is inside a 40 MB SDK; tokencost's copy stopped in 2025-08). Per session, and per
# request, `context_window` overrides it.
MODEL_WINDOWS: dict[str, ModelWindow] = {
    # OpenAI
    "gpt-5.5": _w(1_000_000),
    "gpt-5-5": _w(1_000_000),
    "gpt-5": _w(400_000, 272_000),  # 272k in, 128k out
    "gpt-4.1": _w(1_047_576),
    "gpt-4o": _w(128_000),
    "gpt-4-turbo": _w(128_000),
    "gpt-4": _w(8_192),
    "gpt-3.5-turbo": _w(16_385),
    "gpt-oss": _w(131_072),
    "o1": _w(200_000),
    "o3": _w(200_000),
    "o4-mini": _w(200_000),
    # Anthropic
    "claude-opus-4-7": _w(1_000_000),
    "claude-opus-4": _w(200_000),
    "claude-sonnet-4": _w(200_000),
    "claude-haiku-4": _w(200_000),
    "claude-3": _w(200_000),
    # Google
    "gemini-3": _w(1_114_112, 1_048_576),  # 1,048,576 in, 65,536 out
    "gemini-2.5": _w(1_114_112, 1_048_576),
    "gemini-2.0": _w(1_056_768, 1_048_576),
    "gemma-3": _w(131_072),
    # Mistral
    "mistral-large": _w(131_072),
    "mistral-medium": _w(131_072),
    "mistral-small": _w(131_072),
    "codestral": _w(256_000),
    "devstral": _w(131_072),
    "magistral": _w(131_072),
    "ministral": _w(131_072),
    # Meta Llama
    "llama-4-scout": _w(10_000_000),
    "llama-4-maverick": _w(1_000_000),
    "llama-3": _w(131_072),
    "meta-llama-3": _w(131_072),
    # xAI Grok
    "grok-4-fast": _w(2_000_000),
    "grok-4": _w(256_000),
    "grok-3": _w(131_072),
    "grok-code": _w(256_000),
    # Alibaba Qwen
    "qwen-turbo": _w(1_000_000),
    "qwen3.5-plus": _w(1_000_000),
    "qwen3.6-max": _w(262_000),
    "qwen3-max": _w(262_144),
    "qwen3": _w(131_072),
    "qwen2.5": _w(131_072),
    "qwen-plus": _w(131_072),
    "qwen-max": _w(32_768),
    "qwen-long": _w(10_000_000),
    # DeepSeek
    "deepseek-v4": _w(1_000_000),
    "deepseek-chat": _w(128_000),
    "deepseek-reasoner": _w(128_000),
    "deepseek-v3": _w(128_000),
    # Zhipu GLM
    "glm-5": _w(200_000),
    "glm-4.6": _w(200_000),
    "glm-4.5": _w(128_000),
    "glm-4-long": _w(1_000_000),
    "glm-4": _w(128_000),
    # Moonshot Kimi
    "kimi-k2.6": _w(262_144),
    "kimi-k2": _w(131_072),
    "moonshot-v1-128k": _w(128_000),
    "moonshot-v1-32k": _w(32_000),
    "moonshot-v1-8k": _w(8_000),
    # ByteDance Doubao
    "doubao-seed-2.0": _w(256_000),
    "doubao-seed-1.6": _w(256_000),
    "doubao-1-5-pro-256k": _w(256_000),
    "doubao-1-5-pro-32k": _w(32_000),
    "doubao-pro-256k": _w(256_000),
    "doubao-pro-128k": _w(128_000),
    "doubao-pro-32k": _w(32_000),
    # Tencent Hunyuan
    "hunyuan-turbos": _w(256_000),
    "hunyuan-t1": _w(256_000),
}


def model_window(model: str | None) -> ModelWindow | None:
    """The model's window entry: exact name first, then the longest known prefix, after
    dropping a `provider/` prefix; None when the model is unknown."""
    if not model:
        return None
    name = model.strip().lower().rsplit("/", 1)[-1]
    if name in MODEL_WINDOWS:
        return MODEL_WINDOWS[name]
    best = max((p for p in MODEL_WINDOWS if name.startswith(p)), key=len, default=None)
    return MODEL_WINDOWS[best] if best else None


def window_for_model(model: str | None) -> int | None:
    """The window a prompt for the model may fill (its input limit where it has one), or
    None when the model is unknown."""
    found = model_window(model)
    return found.prompt_limit if found else None


def count_part(counter: TokenCounter, part: Part) -> int:
    """Tokens of one part (tool calls are counted together, by `count_message`)."""
    if isinstance(part, Text | Refusal | Reasoning):
        return counter.count(part.text) if part.text else 0
    if isinstance(part, ToolResult):
        inner = sum(count_part(counter, p) for p in part.content)
        return counter.count(part.call_id) + inner
    if isinstance(part, Media):
        return counter.count_media(part)
    if isinstance(part, Opaque):
        return counter.count(part.json_text)
    return 0


def openai_image_tokens(width: int, height: int, detail: str | None) -> int:
    if detail == "low":
        return OPENAI_IMAGE_BASE
    scale = min(1.0, OPENAI_IMAGE_FIT / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, OPENAI_SHORT_SIDE / min(w, h))
    w, h = w * scale, h * scale
    tiles = math.ceil(w / OPENAI_TILE_PIXELS) * math.ceil(h / OPENAI_TILE_PIXELS)
    return OPENAI_IMAGE_BASE + OPENAI_IMAGE_TILE * tiles


def anthropic_image_tokens(width: int, height: int) -> int:
    scale = min(
        1.0,
        ANTHROPIC_LONG_EDGE / max(width, height),
        math.sqrt(ANTHROPIC_MAX_PIXELS / (width * height)),
    )
    return math.ceil(width * scale * height * scale / ANTHROPIC_PIXELS_PER_TOKEN)


def media_tokens(media: Media, rule: MediaRule = "openai", facts: MediaFacts = MediaFacts()) -> int:
    """An image, clip or file as the provider counts it (docs/TOKENS.md)."""
    if media.kind == "image":
        width, height = facts.size or UNKNOWN_IMAGE_SIZE
        if rule == "anthropic":
            return anthropic_image_tokens(max(1, width), max(1, height))
        return openai_image_tokens(max(1, width), max(1, height), media.detail)
    if media.kind == "audio" and facts.seconds is not None:
        return max(1, math.ceil(facts.seconds * AUDIO_TOKENS_PER_SECOND))
    if facts.pages is not None:
        return facts.pages * PDF_PAGE_TOKENS
    size = len(media.data or "") * 3 // 4  # base64 → bytes
    return max(MIN_MEDIA_TOKENS, size // FILE_BYTES_PER_TOKEN)


def count_message(counter: TokenCounter, message: Message) -> int:
    """Tokens one message adds to a prompt."""
    tokens = MESSAGE_OVERHEAD
    if message.name:
        tokens += NAME_OVERHEAD + counter.count(message.name)
    tokens += sum(count_part(counter, part) for part in message.parts)
    if message.calls:
        tokens += counter.count(call_arguments_json(message.calls))
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
