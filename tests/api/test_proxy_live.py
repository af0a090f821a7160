"""The proxy as users run it: a real `ebbtide serve` on loopback, the scripted upstream on a
loopback port of its own, and the SDKs' sync clients and LangChain's ChatOpenAI pointed at the
proxy. Here streams are real (relayed while the upstream is still sending), connections are
really cut, and a stalled upstream really times out."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from app.bench.upstream import (
    Call,
    ScriptedUpstream,
    cut,
    gated,
    reply,
    stall,
    status,
)
from tests.api.live import serving_proxy

CLIENT_KEY = "sk-live-client-0042"
TIMEOUT_S = 2.0


@dataclass
class LiveProxy:
    base: str
    upstream: ScriptedUpstream

    def openai(self, session: str, **options: Any) -> openai.OpenAI:
        return openai.OpenAI(
            base_url=f"{self.base}/v1",
            api_key=CLIENT_KEY,
            default_headers={"X-Ebbtide-Session": session},
            max_retries=options.pop("max_retries", 0),
            **options,
        )

    def anthropic(self, session: str) -> anthropic.Anthropic:
        return anthropic.Anthropic(
            base_url=self.base,
            api_key=CLIENT_KEY,
            default_headers={"X-Ebbtide-Session": session},
            max_retries=0,
        )

    def counts(self, session: str) -> dict[str, int]:
        answer = httpx.get(f"{self.base}/sessions/{session}/status", timeout=10)
        return dict(answer.json()["counts"])


@pytest.fixture(scope="module")
def live(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveProxy]:
    log = tmp_path_factory.mktemp("proxy") / "serve.log"
    with serving_proxy(database_url, "ebbtide_proxy", log, TIMEOUT_S) as (base, upstream):
        yield LiveProxy(base, upstream)
    assert CLIENT_KEY not in log.read_text()


@pytest.fixture
def proxy(live: LiveProxy) -> LiveProxy:
    live.upstream.script.clear()
    return live


def test_a_sync_client_streams_while_the_upstream_is_still_sending(proxy: LiveProxy) -> None:
    gate = threading.Event()
    proxy.upstream.then(gated("one two three four five six", gate))
    client = proxy.openai("live-stream")
    stream = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Count."}], stream=True
    )
    pieces = []
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
            gate.set()  # the upstream sends the rest only once this piece got here
    assert "".join(pieces) == "one two three four five six"
    assert proxy.counts("live-stream")["window_messages"] == 2


def test_a_sync_anthropic_client_streams_and_its_tool_use_is_recorded(proxy: LiveProxy) -> None:
    gate = threading.Event()
    proxy.upstream.then(gated("Looking it up now", gate), reply("", Call("toolu_1", "f", {"q": 1})))
    client = proxy.anthropic("live-anthropic")
    history: list[Any] = [{"role": "user", "content": "Find it."}]
    with client.messages.stream(model="claude-sonnet-4-5", max_tokens=64, messages=history) as s:
        for _piece in s.text_stream:
            gate.set()
        first = s.get_final_message()
    assert "BUFFERED" not in first.content[0].text  # type: ignore[union-attr]
    history += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": "Go on."},
    ]
    second = client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=history)
    assert second.content[0].type == "tool_use"
    history += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in second.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"}],
        },
    ]
    client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=history)
    sent = proxy.upstream.last().body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert proxy.counts("live-anthropic")["window_messages"] == 6


def test_an_upstream_that_stalls_is_a_504_and_the_input_is_kept(proxy: LiveProxy) -> None:
    proxy.upstream.then(stall(TIMEOUT_S * 3))
    client = proxy.openai("live-stall")
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}])
    assert raised.value.status_code == 504
    assert raised.value.body["code"] == "upstream_timeout"  # type: ignore[index]
    assert proxy.counts("live-stall")["window_messages"] == 1


def test_a_connection_cut_mid_stream_raises_in_each_sdk(proxy: LiveProxy) -> None:
    proxy.upstream.then(cut("the first half"), cut("the first half"))
    stream = proxy.openai("live-cut").chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Go"}], stream=True
    )
    with pytest.raises(openai.APIError, match="nothing of it was recorded"):
        _ = list(stream)
    assert proxy.counts("live-cut")["window_messages"] == 1
    with (
        pytest.raises(anthropic.APIStatusError, match="nothing of it was recorded"),
        proxy.anthropic("live-cut-2").messages.stream(
            model="claude-sonnet-4-5", max_tokens=9, messages=[{"role": "user", "content": "Go"}]
        ) as s,
    ):
        _ = list(s.text_stream)
    assert proxy.counts("live-cut-2")["window_messages"] == 1


def test_the_sdks_own_retry_after_a_429_and_a_500_stores_the_turn_once(proxy: LiveProxy) -> None:
    limited = {"error": {"message": "slow down", "type": "rate_limit_error"}}
    failed = {"error": {"message": "boom", "type": "server_error"}}
    proxy.upstream.then(status(429, limited, **{"retry-after": "0"}), status(500, failed))
    client = proxy.openai("live-retry", max_retries=2)
    answer = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Hi"}]
    )
    assert answer.choices[0].message.content
    assert proxy.counts("live-retry")["window_messages"] == 2


def test_langchain_chat_openai_talks_through_the_proxy(proxy: LiveProxy) -> None:
    model = ChatOpenAI(
        model="gpt-4o",
        base_url=f"{proxy.base}/v1",
        api_key=CLIENT_KEY,  # type: ignore[arg-type]
        default_headers={"X-Ebbtide-Session": "live-langchain"},
        max_retries=0,
    )
    history: list[Any] = [SystemMessage("Be brief."), HumanMessage("Hello")]
    first = model.invoke(history)
    history += [first, HumanMessage("And again?")]
    streamed = "".join(str(chunk.content) for chunk in model.stream(history))
    assert streamed.startswith("ok")
    assert isinstance(first, AIMessage)
    sent = proxy.upstream.last().body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert proxy.counts("live-langchain")["window_messages"] == 4


def test_identical_calls_in_flight_share_one_answer_and_store_one_reply(
    proxy: LiveProxy,
) -> None:
    proxy.upstream.then(stall(1.0))
    client = proxy.openai("live-copies")
    history: list[Any] = [{"role": "user", "content": "Hi"}]
    before = len(proxy.upstream.seen)
    with ThreadPoolExecutor(max_workers=4) as pool:
        copies = [
            pool.submit(client.chat.completions.create, model="gpt-4o", messages=history)
            for _ in range(4)
        ]
        texts = {copy.result().choices[0].message.content for copy in copies}
    assert len(texts) == 1 and texts.pop().startswith("late ")  # the first call's answer
    assert len(proxy.upstream.seen) == before + 1  # one went upstream
    assert proxy.counts("live-copies")["window_messages"] == 2  # one reply stored
    again = client.chat.completions.create(model="gpt-4o", messages=history)
    assert again.choices[0].message.content.startswith("ok ")  # answered: a new call again
    assert len(proxy.upstream.seen) == before + 2


def test_identical_streams_in_flight_each_get_the_whole_stream_once_recorded(
    proxy: LiveProxy,
) -> None:
    proxy.upstream.then(stall(1.0))
    client = proxy.openai("live-stream-copies")
    history: list[Any] = [{"role": "user", "content": "Tell me"}]
    before = len(proxy.upstream.seen)

    def streamed() -> str:
        stream = client.chat.completions.create(model="gpt-4o", messages=history, stream=True)
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    with ThreadPoolExecutor(max_workers=3) as pool:
        texts = {text for text in pool.map(lambda _: streamed(), range(3))}
    assert len(texts) == 1 and texts.pop().startswith("late ")
    assert len(proxy.upstream.seen) == before + 1
    assert proxy.counts("live-stream-copies")["window_messages"] == 2
