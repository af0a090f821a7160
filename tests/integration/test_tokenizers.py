"""Per-family token counters (app/providers/tokenizer.py) and what they read of media."""

from __future__ import annotations

import base64
import io
import wave

import pytest
from PIL import Image

from app.core.messages import Media
from app.core.tokens import MediaFacts
from app.evaluation.hard_set import filler_pools, hard_needles
from app.providers.tokenizer import (
    ENCODINGS,
    TiktokenCounter,
    counter_for_encoding,
    counter_for_model,
    encoding_for_model,
    media_facts,
)


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o-mini", "o200k_base"),
        ("gpt-5.1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("qwen3.6-plus", "qwen3.6"),
        ("qwen-plus", "qwen3.6"),
        ("Qwen/Qwen2.5-72B-Instruct", "qwen3"),
        ("deepseek-v4-pro", "deepseek-v4"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama3"),
        ("mistral-large-latest", "tekken"),
        ("claude-sonnet-4-5", "claude"),
        ("glm-4.6", "chinese-first"),
        ("kimi-k2.6", "chinese-first"),
        ("gemini-2.5-pro", "gemini"),
        ("my-private-llm", "cl100k_base"),
        (None, "cl100k_base"),
    ],
)
def test_a_model_is_counted_with_its_familys_tokenizer(model: str | None, encoding: str) -> None:
    assert encoding_for_model(model) == encoding


def corpus() -> list[str]:
    texts = [t for n in hard_needles() for t in (*n.fact, n.question, n.twin)]
    texts += [line for pool in filler_pools().values() for line in (*pool.user, *pool.assistant)]
    return texts


def test_the_fast_cl100k_counts_exactly_as_tiktoken_does() -> None:
    fast, reference = counter_for_encoding("cl100k_base"), TiktokenCounter()
    texts = [*corpus(), "user typed <|endoftext|> and <|im_start|> literally"]
    assert [fast.count(t) for t in texts] == [reference.count(t) for t in texts]


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_every_family_loads_offline_and_counts_chinese_as_its_vocabulary_does(
    encoding: str,
) -> None:
    counter = counter_for_encoding(encoding)
    chinese = "".join(t for t in corpus() if any("\u4e00" <= c <= "\u9fff" for c in t))
    cl100k = counter_for_encoding("cl100k_base").count(chinese)
    if encoding in ("cl100k_base", "claude"):
        assert counter.count(chinese) >= 0.9 * cl100k
    else:  # vocabularies built for Chinese need far fewer tokens than cl100k
        assert counter.count(chinese) < 0.9 * cl100k, encoding


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_media_facts_are_read_from_the_payload() -> None:
    png = io.BytesIO()
    Image.new("RGB", (640, 480)).save(png, format="PNG")
    assert media_facts(Media("image", data=b64(png.getvalue()))) == MediaFacts(size=(640, 480))
    clip = io.BytesIO()
    with wave.open(clip, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\0\0" * 8000 * 3)
    assert media_facts(Media("audio", data=b64(clip.getvalue()))) == MediaFacts(seconds=3.0)
    pdf = b"%PDF-1.4\n1 0 obj <</Type /Pages>>\n2 0 obj <</Type /Page>>\n3 0 obj <</Type/Page>>"
    assert media_facts(Media("file", data=b64(pdf))) == MediaFacts(pages=2)
    assert media_facts(Media("image", data=b64(b"not an image"))) == MediaFacts()
    assert media_facts(Media("image", url="https://example.test/a.png")) == MediaFacts()


def test_claude_counts_images_by_anthropics_rule() -> None:
    png = io.BytesIO()
    Image.new("RGB", (1000, 1000)).save(png, format="PNG")
    image = Media("image", data=b64(png.getvalue()))
    assert counter_for_model("claude-sonnet-4-5").count_media(image) == 1334
    assert counter_for_model("gpt-4o").count_media(image) == 765
