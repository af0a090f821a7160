"""Images, clips and files that can never script Ebbtide's origin (issue 34, N1 and N3): an
inline payload is checked when it is posted (an accepted media type as a clean token, base64
data) and refused with a 422 that writes nothing; a stored one is served with `nosniff`, a
sandboxing CSP, and as an attachment unless it is an image or a clip."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from app.core.blobs import ACCEPTED_MEDIA_TYPES, blob_hash, media_problem, served_as
from app.core.messages import Media
from app.core.types import session_key
from app.services.context import ServiceContext
from app.store.models import BlobRow
from tests.builders import words
from tests.unit.test_formats import PNG

WINDOW = {"context_window": 32_000}
SCRIPT = base64.b64encode(b"<script>fetch('/sessions')</script>").decode()


def image_url(url: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}


def anthropic_image(media_type: str, data: str) -> dict[str, Any]:
    source = {"type": "base64", "media_type": media_type, "data": data}
    return {"role": "user", "content": [{"type": "image", "source": source}]}


REFUSED = [
    ("html as an image", "openai", image_url(f"data:text/html;base64,{SCRIPT}")),
    ("svg", "openai", image_url(f"data:image/svg+xml;base64,{SCRIPT}")),
    ("bad base64 padding", "openai", image_url(f"data:image/png;base64,{PNG[:-3]}")),
    ("a line break in the type", "anthropic", anthropic_image("image/png\r\nX-Evil: 1", PNG)),
    ("a non-Latin-1 type", "anthropic", anthropic_image("image/pngé", PNG)),
    ("parameters in the type", "anthropic", anthropic_image("image/png; charset=x", PNG)),
]


@pytest.mark.parametrize(("case", "fmt", "message"), REFUSED, ids=[c[0] for c in REFUSED])
async def test_payloads_that_could_not_be_served_safely_are_refused_and_nothing_is_written(
    client: httpx.AsyncClient, case: str, fmt: str, message: dict[str, Any]
) -> None:
    body = {**WINDOW, "format": fmt, "messages": [message]}
    response = await client.post("/sessions/media/turn", json=body)
    assert response.status_code == 422, (case, response.text)
    error = response.json()["error"]
    assert error["code"] == "unsupported_media" and error["details"]["field"] == "messages[0]"
    assert (await client.get("/sessions/media/status")).status_code == 404


async def test_the_proxy_refuses_them_too(client: httpx.AsyncClient) -> None:
    body = {"model": "gpt-4o", "messages": [image_url(f"data:text/html;base64,{SCRIPT}")]}
    headers = {"X-Ebbtide-Session": "media-proxy"}
    response = await client.post("/v1/chat/completions", json=body, headers=headers)
    assert response.status_code == 422 and "unsupported_media" in response.text


async def test_an_accepted_image_is_stored_and_served_with_guards(
    client: httpx.AsyncClient,
) -> None:
    upper = anthropic_image("IMAGE/PNG", PNG)  # types are case-insensitive
    upper["content"].append({"type": "text", "text": words(400, "pic")})
    small = {"context_window": 3_000, "policy": {"floor_turns": 1, "floor_tokens": 0}}
    for _ in range(4):
        body = {**small, "format": "anthropic", "messages": [upper]}
        assert (await client.post("/sessions/pic/turn", json=body)).status_code == 200
    served = await client.get(f"/sessions/pic/blobs/{blob_hash(PNG)}")
    assert served.status_code == 200 and served.headers["content-type"] == "image/png"
    assert served.headers["x-content-type-options"] == "nosniff"
    assert served.headers["content-security-policy"] == "sandbox"
    assert "content-disposition" not in served.headers  # an image may be shown in place


async def test_a_payload_stored_before_the_check_goes_out_as_an_attachment_of_bytes(
    client: httpx.AsyncClient, ctx: ServiceContext
) -> None:
    opened = await client.post(
        "/sessions/old/turn", json={**WINDOW, "messages": [{"role": "user", "content": "hi"}]}
    )
    assert opened.status_code == 200
    stored = {"html": ("text/html", SCRIPT), "broken": ("image/png", PNG[:-3])}
    async with ctx.database.transaction() as db:
        for name, (media_type, data) in stored.items():
            db.add(
                BlobRow(
                    session_id=session_key("local", "old"),
                    hash=blob_hash(name),
                    kind="image",
                    media_type=media_type,
                    data=data,
                    size=len(data),
                )
            )
    html = await client.get(f"/sessions/old/blobs/{blob_hash('html')}")
    assert html.status_code == 200
    assert html.headers["content-type"] == "application/octet-stream"
    assert html.headers["content-disposition"].startswith("attachment")
    assert html.headers["content-security-policy"] == "sandbox"
    broken = await client.get(f"/sessions/old/blobs/{blob_hash('broken')}")
    assert broken.status_code == 410 and broken.json()["error"]["code"] == "unreadable_blob"


def test_what_is_accepted_and_how_it_is_served() -> None:
    assert media_problem(Media("image", url="https://example.invalid/x.png")) is None
    assert media_problem(Media("file", data=PNG)) is None  # no type: bytes
    assert media_problem(Media("image", media_type="image/png", data=PNG)) is None
    assert "base64" in (media_problem(Media("image", media_type="image/png", data="%%")) or "")
    assert "text/html" not in ACCEPTED_MEDIA_TYPES and "image/svg+xml" not in ACCEPTED_MEDIA_TYPES
    assert served_as("application/pdf").inline is False
    assert served_as("audio/wav").inline is True
    assert served_as(None).media_type == "application/octet-stream"
