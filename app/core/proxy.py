"""What the proxy does to a request and takes from a reply (docs/PROXY.md), with no I/O.

A client's request goes upstream as it came, but for its messages: Chat Completions gets the
assembled prompt as `messages`, Messages gets it as `system` + `messages`. Every other field
(model, tools, sampling, `stream`, metadata) passes through. A streamed Chat Completions call
is asked for its usage (`stream_options.include_usage`) when the client did not ask, and the
usage-only chunk that adds is kept from the client.

From a reply the proxy takes the assistant message, to record as the next turn's first
message, and the provider's usage: the prompt's size (which calibrates the session's token
estimate) and how much of it the provider's cache served.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from app.core.messages import Format, JsonObject

# Request headers that carry the client's provider credentials and API options: forwarded
# unchanged, never stored or logged.
FORWARDED_HEADERS = (
    "authorization",
    "x-api-key",
    "anthropic-version",
    "anthropic-beta",
    "openai-organization",
    "openai-project",
    "openai-beta",
)

# Upstream response headers passed back: only what a provider's client reads (the body's
# type, the request id, rate limits, when to retry). Everything else stays behind: hop-by-hop
# headers, those describing a body this service re-frames (it relays the decoded bytes), and
# anything that would act on Ebbtide's origin, `Set-Cookie` first.
RELAYED_RESPONSE_HEADERS = frozenset(
    {
        "content-type",
        "x-request-id",
        "request-id",
        "retry-after",
        "retry-after-ms",
        "openai-processing-ms",
        "openai-version",
    }
)
RELAYED_RESPONSE_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")


class ProxyRoute(StrEnum):
    """A provider API the proxy serves, named by the format its messages come in."""

    CHAT_COMPLETIONS = "chat_completions"
    MESSAGES = "messages"

    @property
    def message_format(self) -> Format:
        return Format.OPENAI if self is ProxyRoute.CHAT_COMPLETIONS else Format.ANTHROPIC

    def upstream_url(self, base_url: str) -> str:
        """Where the request goes, from the base URL written as the provider's SDK takes it
        (OpenAI's ends in `/v1`; Anthropic's has none)."""
        base = base_url.rstrip("/")
        return (
            f"{base}/chat/completions"
            if self is ProxyRoute.CHAT_COMPLETIONS
            else f"{base}/v1/messages"
        )


@dataclass(frozen=True)
class ProviderUsage:
    """The provider's count of the prompt it received, and of the part its cache served."""

    prompt_tokens: int | None = None
    cached_tokens: int | None = None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def openai_usage(usage: Any) -> ProviderUsage:
    """Chat Completions `usage`: `prompt_tokens` includes the cached ones."""
    if not isinstance(usage, dict):
        return ProviderUsage()
    details = usage.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else None
    return ProviderUsage(_int(usage.get("prompt_tokens")), cached)


def anthropic_usage(usage: Any) -> ProviderUsage:
    """Messages `usage`: `input_tokens` leaves out what was read from or written to the
    cache, so the prompt is the sum of the three."""
    if not isinstance(usage, dict) or _int(usage.get("input_tokens")) is None:
        return ProviderUsage()
    read = _int(usage.get("cache_read_input_tokens")) or 0
    written = _int(usage.get("cache_creation_input_tokens")) or 0
    return ProviderUsage(int(usage["input_tokens"]) + read + written, read)


def without_nulls(value: Any) -> Any:
    """The value with every null member of its objects left out (a reply's `refusal: null`,
    a text block's `citations: null`): what a client sends back rarely has them."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


def openai_reply(body: Any) -> tuple[JsonObject | None, ProviderUsage]:
    """The first choice's message of a Chat Completions answer (None when it has none)."""
    if not isinstance(body, dict):
        return None, ProviderUsage()
    usage = openai_usage(body.get("usage"))
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None, usage
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return None, usage
    posted = without_nulls(message)
    if posted.get("annotations") == []:
        del posted["annotations"]
    return posted, usage


def anthropic_reply(body: Any) -> tuple[JsonObject | None, ProviderUsage]:
    """The assistant message of a Messages answer, its content blocks as they came."""
    if not isinstance(body, dict):
        return None, ProviderUsage()
    usage = anthropic_usage(body.get("usage"))
    content = body.get("content")
    if not isinstance(content, list):
        return None, usage
    return {"role": "assistant", "content": without_nulls(content)}, usage


def upstream_body(
    route: ProxyRoute,
    client_body: JsonObject,
    messages: list[JsonObject],
    system: list[JsonObject] | None,
) -> tuple[JsonObject, bool]:
    """The body to send upstream, and whether a usage chunk was asked for on the client's
    behalf (and must be kept from it)."""
    body = dict(client_body)
    body["messages"] = messages
    if route is ProxyRoute.MESSAGES:
        if system:
            body["system"] = system
        else:
            body.pop("system", None)
        return body, False
    asks_usage = body.get("stream") is True and "stream_options" not in body
    if asks_usage:
        body["stream_options"] = {"include_usage": True}
    return body, asks_usage


@dataclass(frozen=True)
class UpstreamRequest:
    """A call to the provider: its URL, the forwarded headers, the JSON body."""

    url: str
    headers: tuple[tuple[str, str], ...]
    body: JsonObject
    stream: bool = False


@dataclass(frozen=True)
class UpstreamReply:
    """A provider's whole answer, as it came (body decoded from any transfer encoding)."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def relayed_headers(headers: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """The upstream's response headers the client gets (rate limits, request ids, type)."""
    return {
        name: value
        for name, value in headers
        if name.lower() in RELAYED_RESPONSE_HEADERS
        or name.lower().startswith(RELAYED_RESPONSE_PREFIXES)
    }
