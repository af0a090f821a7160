"""The flat hybrid baseline of the eval (app/evaluation/flat.py): chunks of four messages,
BM25 and dense rankings fused by reciprocal rank."""

from __future__ import annotations

from app.evaluation.flat import FlatIndex, chunked, rrf
from app.providers.embedders import HashEmbedder


def test_messages_are_cut_into_chunks_of_four_in_order() -> None:
    messages = [f"m{i}" for i in range(10)]
    assert chunked(messages) == ["m0\nm1\nm2\nm3", "m4\nm5\nm6\nm7", "m8\nm9"]


def test_fusion_prefers_what_both_rankings_put_high() -> None:
    # 2 is second in both; 0 and 1 are first in one and absent from the other.
    assert rrf([[0, 2, 3], [1, 2, 3]])[0] == 2
    assert rrf([[0, 2], [1, 2]], k=0) == [0, 2, 1]  # all three score 1: first seen first
    assert rrf([]) == []


async def test_a_question_finds_the_chunk_that_shares_its_rare_words() -> None:
    filler = [f"small talk number {i} about the weather and lunch" for i in range(40)]
    fact = "The locker combination is 4471, next to the cargo lift."
    messages = [*filler[:21], fact, *filler[21:]]
    embedder = HashEmbedder()
    index = await FlatIndex.build(embedder, messages)
    assert len(index.chunks) == 11
    ranked = await index.ranked(embedder, "Which combination opens the locker?")
    assert "4471" in ranked[0]
    assert sorted(ranked) == sorted(index.chunks)  # every chunk is ranked, none twice


async def test_chinese_is_matched_through_bigrams() -> None:
    small_talk = ["今天天气不错。", "我们周末去爬山吧。", "晚饭吃什么？", "明天见。"]
    messages = [*small_talk, *small_talk[:2], "仓库的门禁密码是八八六。", *small_talk]
    embedder = HashEmbedder()
    index = await FlatIndex.build(embedder, messages)
    ranked = await index.ranked(embedder, "门禁密码是多少？")
    assert ranked[0] == index.chunks[1]


async def test_a_question_without_terms_ranks_by_meaning_alone() -> None:
    embedder = HashEmbedder()
    index = await FlatIndex.build(embedder, ["alpha beta", "gamma delta"])
    ranked = await index.ranked(embedder, "?!")
    assert sorted(ranked) == sorted(index.chunks)
