"""The official Node SDKs (`openai`, `@anthropic-ai/sdk`, pinned in tests/node/package-lock.json)
as clients of a real `ebbtide serve`'s proxy, the scripted upstream behind it: Chat
Completions, Responses and Messages, streamed and not, the token count and the model list,
and Ebbtide's refusals raised as each SDK's own typed errors (tests/node/proxy_clients.mjs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.bench.upstream import MODELS, ScriptedUpstream

NODE_DIR = Path(__file__).parents[1] / "node"
NPM_TIMEOUT_S = 300
SCRIPT_TIMEOUT_S = 120

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None, reason="needs node and npm"
)


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """The SDKs at the locked versions (`npm ci`, skipped when already installed from this
    lockfile)."""
    installed = NODE_DIR / "node_modules" / ".package-lock.json"
    lock = NODE_DIR / "package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=NODE_DIR,
            check=True,
            timeout=NPM_TIMEOUT_S,
        )
    return NODE_DIR / "node_modules"


def run_clients(base: str) -> dict[str, Any]:
    done = subprocess.run(
        ["node", str(NODE_DIR / "proxy_clients.mjs")],
        env={**os.environ, "EBBTIDE_URL": base},
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    said: dict[str, Any] = json.loads(done.stdout)
    return said


def window_messages(base: str, session: str) -> int:
    answer = httpx.get(f"{base}/sessions/{session}/status", timeout=10)
    answer.raise_for_status()
    return int(answer.json()["counts"]["window_messages"])


def test_the_node_sdks_talk_through_the_proxy(
    node_modules: Path, live_proxy: tuple[str, ScriptedUpstream]
) -> None:
    base, upstream = live_proxy
    said = run_clients(base)
    paths = [seen.path for seen in upstream.seen]
    assert paths.count("/v1/chat/completions") == 2 and paths.count("/v1/responses") == 2
    assert paths.count("/v1/messages") == 2 and "/v1/messages/count_tokens" in paths
    assert said["chat"].startswith("ok ") and said["chat_streamed"].startswith("ok ")
    assert said["responses"].startswith("ok ") and said["messages"].startswith("ok ")
    assert said["messages_streamed"].startswith("ok ")
    assert said["responses_events"][-1] == "response.completed"
    assert said["count_tokens"] > 0
    assert said["openai_models"] == list(MODELS) == said["anthropic_models"]
    # each session holds its two exchanges once: the replies recorded, then recognised when
    # the SDK's own reply objects came back in the history (none stored twice)
    for session in ("node-chat", "node-responses", "node-messages"):
        assert window_messages(base, session) == 4, session
    openai_refusal, anthropic_refusal = said["openai_refusal"], said["anthropic_refusal"]
    assert openai_refusal["raised"] == "UnprocessableEntityError"
    assert "ebbtide unsupported_parameter" in openai_refusal["message"]
    assert anthropic_refusal["raised"] == "UnprocessableEntityError"
    assert "ebbtide missing_session" in anthropic_refusal["message"]
