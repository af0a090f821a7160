"""What the proxy does to a request and takes from a reply (docs/PROXY.md), with no I/O.

A client's request goes upstream as it came, but for its messages: Chat Completions gets the
assembled prompt as `messages`, Messages gets it as `system` + `messages`, Responses as
`input` (its `instructions` are the prompt's system message by then). Every other field
(model, tools, sampling, `stream`, metadata) passes through. A streamed Chat Completions call
is asked for its usage (`stream_options.include_usage`) when the client did not ask, and the
usage-only chunk that adds is kept from the client.

From a reply the proxy takes what the model said, to record as the next turn's first
messages (one assistant message; for Responses one per output item, as its input takes
them), and the provider's usage: the prompt's size (which calibrates the session's token
estimate) and how much of it the provider's cache served.

Ebbtide's own refusals on these routes answer in the provider's error shape, so that the
caller's SDK raises its own typed error; Ebbtide's code rides in the message and as `code`.
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


class Provider(StrEnum):
    """Whose API a route speaks: which base URL it goes to, which error shape it answers in."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"

    def url(self, base_url: str, path: str) -> str:
        """`path` (as under `/v1/`) on the base URL written as the provider's SDK takes it
        (OpenAI's ends in `/v1`; Anthropic's has none)."""
        base = base_url.rstrip("/")
        return f"{base}/{path}" if self is Provider.OPENAI else f"{base}/v1/{path}"


class ProxyRoute(StrEnum):
    """A provider API the proxy serves as a turn, named by its path under `/v1/`."""

    CHAT_COMPLETIONS = "chat_completions"
    MESSAGES = "messages"
    RESPONSES = "responses"

    @property
    def message_format(self) -> Format:
        return _ROUTE_FORMATS[self]

    @property
    def provider(self) -> Provider:
        return Provider.ANTHROPIC if self is ProxyRoute.MESSAGES else Provider.OPENAI

    def upstream_url(self, base_url: str) -> str:
        """Where the request goes, from the provider's base URL."""
        path = "chat/completions" if self is ProxyRoute.CHAT_COMPLETIONS else self.value
        return self.provider.url(base_url, path)


_ROUTE_FORMATS = {
    ProxyRoute.CHAT_COMPLETIONS: Format.OPENAI,
    ProxyRoute.MESSAGES: Format.ANTHROPIC,
    ProxyRoute.RESPONSES: Format.RESPONSES,
}


@dataclass(frozen=True)
class ProviderUsage:
    """The provider's count of the prompt it received, and of the part its cache served."""

    prompt_tokens: int | None = None
    cached_tokens: int | None = None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage_with_cached_details(usage: Any, prompt_key: str) -> ProviderUsage:
    """OpenAI's two shapes: the prompt's count under `prompt_key` includes the cached tokens,
    which `<prompt_key>_details.cached_tokens` gives."""
    if not isinstance(usage, dict):
        return ProviderUsage()
    details = usage.get(f"{prompt_key}_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else None
    return ProviderUsage(_int(usage.get(prompt_key)), cached)


def openai_usage(usage: Any) -> ProviderUsage:
    """Chat Completions `usage`: `prompt_tokens` includes the cached ones."""
    return _usage_with_cached_details(usage, "prompt_tokens")


def responses_usage(usage: Any) -> ProviderUsage:
    """Responses `usage`: `input_tokens` includes the cached ones."""
    return _usage_with_cached_details(usage, "input_tokens")


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


@dataclass(frozen=True)
class ProviderReply:
    """What a reply said, as messages posted in the route's format (none when the reply
    could not be read), and the provider's usage."""

    posted: tuple[JsonObject, ...] = ()
    usage: ProviderUsage = ProviderUsage()


def openai_reply(body: Any) -> ProviderReply:
    """The first choice's message of a Chat Completions answer (the proxy refuses `n > 1`)."""
    if not isinstance(body, dict):
        return ProviderReply()
    usage = openai_usage(body.get("usage"))
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ProviderReply(usage=usage)
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return ProviderReply(usage=usage)
    posted = without_nulls(message)
    if posted.get("annotations") == []:
        del posted["annotations"]
    return ProviderReply((posted,), usage)


def anthropic_reply(body: Any) -> ProviderReply:
    """The assistant message of a Messages answer, its content blocks as they came."""
    if not isinstance(body, dict):
        return ProviderReply()
    usage = anthropic_usage(body.get("usage"))
    content = body.get("content")
    if not isinstance(content, list):
        return ProviderReply(usage=usage)
    return ProviderReply(({"role": "assistant", "content": without_nulls(content)},), usage)


def responses_reply(body: Any) -> ProviderReply:
    """A Responses answer's output items, each as the client sends it back in its input."""
    if not isinstance(body, dict):
        return ProviderReply()
    usage = responses_usage(body.get("usage"))
    output = body.get("output")
    if not isinstance(output, list) or not all(isinstance(item, dict) for item in output):
        return ProviderReply(usage=usage)
    return ProviderReply(tuple(without_nulls(item) for item in output), usage)


def provider_reply(route: ProxyRoute, body: Any) -> ProviderReply:
    """What the route's answer said (its JSON already parsed)."""
    read = {
        ProxyRoute.CHAT_COMPLETIONS: openai_reply,
        ProxyRoute.MESSAGES: anthropic_reply,
        ProxyRoute.RESPONSES: responses_reply,
    }[route]
    return read(body)


def upstream_body(
    route: ProxyRoute,
    client_body: JsonObject,
    messages: list[JsonObject],
    system: list[JsonObject] | None,
) -> tuple[JsonObject, bool]:
    """The body to send upstream, and whether a usage chunk was asked for on the client's
    behalf (and must be kept from it)."""
    body = dict(client_body)
    if route is ProxyRoute.RESPONSES:
        body.pop("instructions", None)  # read as the system prompt: the input's first item
        body["input"] = messages
        return body, False
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
    body: JsonObject | None  # None: a GET
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


# The error `type` each provider gives a status; a status not named is the provider's
# server-side type.
OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}
ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "invalid_request_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    504: "timeout_error",
}


def provider_error(
    provider: Provider, status: int, code: str, message: str, details: JsonObject
) -> JsonObject:
    """An Ebbtide refusal in the provider's error body: OpenAI's `{"error": {message, type,
    param, code}}`, Anthropic's `{"type": "error", "error": {type, message}}`. The message
    opens with Ebbtide's code (what an SDK's exception shows); `code` and `details` ride along
    as Ebbtide's own error body has them."""
    said = f"ebbtide {code}: {message}"
    field = details.get("field")
    problems = details.get("problems")
    if field is None and isinstance(problems, list) and problems:
        field = problems[0].get("field")
    if provider is Provider.OPENAI:
        kind = OPENAI_ERROR_TYPES.get(status, "server_error")
        error = {"message": said, "type": kind, "param": field, "code": code, "details": details}
        return {"error": error}
    kind = ANTHROPIC_ERROR_TYPES.get(status, "api_error")
    return {
        "type": "error",
        "error": {"type": kind, "message": said, "code": code, "details": details},
    }
