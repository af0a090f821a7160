"""What the proxy adds to a model call, for docs/PROXY.md: one run, the same conversation
sent straight to a scripted upstream and through `ebbtide serve` to it, call for call.

    python scripts/measure_proxy.py --calls 200 --out docs/proxy/latency.md

The upstream answers at once (no model runs), so the direct call is the floor and everything
above it is the proxy: parsing the whole history, reconciling it, the turn (offloads with the
embedder, recall), forwarding, and recording the reply. Each call grows the conversation by a
user message of about 120 words and a reply; the window is small enough that it offloads
every few calls. Both routes of each pair see the same history; the pairs alternate which
goes first, so drift hits both alike.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from app.bench.servers import scratch_database, serving
from app.bench.upstream import ScriptedUpstream, serve_in_thread
from app.core.stats import percentiles

WORDS = (
    "the pipeline reads each shard, checks its schema against the registry, writes the "
    "rejects to a quarantine table and reports the counts per region before the nightly cut"
).split()


def user_text(i: int) -> str:
    return f"Step {i}: " + " ".join(WORDS[(i + k) % len(WORDS)] for k in range(120))


def timed_call(
    client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str]
) -> tuple[float, dict[str, Any], httpx.Headers]:
    started = time.perf_counter()
    answer = client.post(url, json=body, headers=headers)
    elapsed = (time.perf_counter() - started) * 1000
    answer.raise_for_status()
    return elapsed, answer.json(), answer.headers


def _carries_text(line: str) -> bool:
    if not line.startswith("data: {"):
        return False
    choices = json.loads(line.removeprefix("data: ")).get("choices") or [{}]
    return bool(choices[0].get("delta", {}).get("content"))


def first_token_ms(
    client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str]
) -> float:
    """Time to the first chunk carrying text; the rest of the stream is read and dropped."""
    started = time.perf_counter()
    first = None
    with client.stream("POST", url, json={**body, "stream": True}, headers=headers) as answer:
        answer.raise_for_status()
        for line in answer.iter_lines():
            if first is None and _carries_text(line):
                first = (time.perf_counter() - started) * 1000
    assert first is not None, "the stream carried no text"
    return first


SERIES = (
    "direct",  # straight to the upstream
    "proxy",  # the same call through the proxy
    "turn",  # the same turn through POST /turn (the turn alone: no forwarding, no history)
    "direct_ttft",
    "proxy_ttft",
    "proxy_steady",  # proxied calls that did not offload
    "turn_steady",
    "proxy_offload",
    "turn_offload",
)


def _offloaded(headers: httpx.Headers) -> bool:
    return headers.get("x-ebbtide-offloaded-chunks", "0") != "0"


def measure(base: str, upstream_base: str, calls: int, window: int) -> dict[str, Any]:
    direct_url = f"{upstream_base}/v1/chat/completions"
    proxy_url = f"{base}/v1/chat/completions"
    credentials = {"Authorization": "Bearer sk-measure"}
    samples: dict[str, list[float]] = {name: [] for name in SERIES}
    history: list[dict[str, Any]] = [{"role": "system", "content": "Answer briefly."}]
    new: list[dict[str, Any]] = []  # what POST /turn is sent: the messages since its last call
    with httpx.Client(timeout=120) as client:
        for i in range(calls):
            history.append({"role": "user", "content": user_text(i)})
            new.append(history[-1])
            body = {"model": "gpt-4o", "messages": history}
            headers = {**credentials, "X-Ebbtide-Context-Window": str(window)}
            session = {**headers, "X-Ebbtide-Session": "measure"}
            if i % 2 == 0:
                direct_ms, _, _ = timed_call(client, direct_url, body, credentials)
                proxy_ms, answer, answer_headers = timed_call(client, proxy_url, body, session)
            else:
                proxy_ms, answer, answer_headers = timed_call(client, proxy_url, body, session)
                direct_ms, _, _ = timed_call(client, direct_url, body, credentials)
            turn_body = {"model": "gpt-4o", "context_window": window, "messages": new}
            if i == 0:
                turn_body["system"] = history[0]["content"]
            turn_started = time.perf_counter()
            turned = client.post(f"{base}/sessions/measure-turn/turn", json=turn_body)
            turn_ms = (time.perf_counter() - turn_started) * 1000
            turned.raise_for_status()
            samples["direct"].append(direct_ms)
            samples["proxy"].append(proxy_ms)
            samples["turn"].append(turn_ms)
            kind = "offload" if _offloaded(answer_headers) else "steady"
            samples[f"proxy_{kind}"].append(proxy_ms)
            turn_kind = "offload" if turned.json()["offload"]["triggered"] else "steady"
            samples[f"turn_{turn_kind}"].append(turn_ms)
            stream_headers = {**headers, "X-Ebbtide-Session": "measure-stream"}
            samples["direct_ttft"].append(first_token_ms(client, direct_url, body, credentials))
            samples["proxy_ttft"].append(first_token_ms(client, proxy_url, body, stream_headers))
            history.append(answer["choices"][0]["message"])
            new = [history[-1]]
    return {name: percentiles(values) for name, values in samples.items()}


def _ms(figure: dict[str, float]) -> str:
    return f"{figure['p50']:.1f} / {figure['p95']:.1f}"


def report(figures: dict[str, Any], calls: int, window: int, history_tokens: int) -> str:
    def row(name: str, proxied: str, turn: str | None) -> str:
        base = figures["direct" if turn else "direct_ttft"]
        p = figures[proxied]
        alone = f"{_ms(figures[turn])} (n {figures[turn]['n']})" if turn else "—"
        return (
            f"| {name} (n {p['n']}) | {_ms(base)} | {_ms(p)} | {alone} | "
            f"{p['p50'] - base['p50']:+.1f} / {p['p95'] - base['p95']:+.1f} | "
            f"{p['p50'] / base['p50']:.0f}× / {p['p95'] / base['p95']:.0f}× |"
        )

    return "\n".join(
        [
            f"One run, {calls} calls of one growing conversation (window {window} tokens, "
            f"about {history_tokens} tokens of history at the end: the calls offload often), "
            "the local embedder, 2 cores. Milliseconds, p50 / p95. *The turn alone* is the "
            "same conversation posted to `POST /turn` (new messages only, nothing forwarded): "
            "what is left between it and the proxy is the proxy's own work.",
            "",
            "| call | direct | through the proxy | the turn alone | added | ratio |",
            "| --- | --- | --- | --- | --- | --- |",
            row("non-streamed, all", "proxy", "turn"),
            row("non-streamed, no offload", "proxy_steady", "turn_steady"),
            row("non-streamed, offloading", "proxy_offload", "turn_offload"),
            row("streamed, first token", "proxy_ttft", None),
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--window", type=int, default=8000)
    parser.add_argument("--embedder", default="local", choices=["local", "hash"])
    parser.add_argument("--out", type=Path, default=Path("docs/proxy/latency.md"))
    args = parser.parse_args()
    upstream = ScriptedUpstream()
    with tempfile.TemporaryDirectory() as scratch, serve_in_thread(upstream) as upstream_base:
        url = scratch_database(Path(scratch) / "data", "measure_proxy")
        proxy_env = {"EBBTIDE_PROXY__OPENAI_BASE_URL": f"{upstream_base}/v1"}
        with serving(url, args.embedder, Path(scratch) / "serve.log", proxy_env) as server:
            figures = measure(server.base, upstream_base, args.calls, args.window)
    words = sum(len(user_text(i).split()) for i in range(args.calls))
    text = report(figures, args.calls, args.window, round(words * 1.3))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(figures, indent=2) + "\n")
    print(text)


if __name__ == "__main__":
    main()
