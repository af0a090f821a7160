"""Images, clips and files of offloaded messages: stored once per session, by content hash.

An offload keeps every message's posted form in its chunk (`sources`), so the parts survive,
not only their words. A base64 payload inside that form is replaced by a reference
`ebbtide-blob:sha256:<hash>` and its bytes go to the session's blobs, where a payload posted
twice is kept once. The chunk's text names each payload by kind, size and hash (chunker).

A payload is checked when it is posted, so every stored blob can be served back, and served so
that it can never run as a page of Ebbtide's origin: its media type must be a clean
`type/subtype` token among the accepted images, audio and documents (never HTML, SVG or
script), its data base64. It is served with its type, `nosniff`, a sandboxing CSP, and as an
attachment unless it is an image or a clip.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.core.formats import posted_form
from app.core.messages import JsonObject, Media, Message
from app.core.types import WindowMessage

BLOB_REF_PREFIX = "ebbtide-blob:sha256:"


def blob_hash(data: str) -> str:
    """The key a media payload (base64 text) is stored under."""
    return hashlib.sha256(data.encode()).hexdigest()


@dataclass(frozen=True)
class Blob:
    hash: str
    kind: str
    media_type: str | None
    data: str  # base64

    @property
    def size(self) -> int:
        """Bytes the payload decodes to."""
        return len(self.data) * 3 // 4 - self.data[-2:].count("=")


def _with_refs(value: Any, refs: dict[str, str]) -> Any:
    if isinstance(value, str):
        for payload, ref in refs.items():
            if payload in value:
                value = value.replace(payload, ref)
        return value
    if isinstance(value, dict):
        return {key: _with_refs(item, refs) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_refs(item, refs) for item in value]
    return value


def archived(messages: Sequence[WindowMessage]) -> tuple[list[JsonObject], list[Blob]]:
    """The messages' posted forms as a chunk keeps them, and the payloads they referred to."""
    sources: list[JsonObject] = []
    blobs: dict[str, Blob] = {}
    for item in messages:
        refs: dict[str, str] = {}
        for media in item.message.media:
            if media.data:
                blob = Blob(blob_hash(media.data), media.kind, media.media_type, media.data)
                blobs.setdefault(blob.hash, blob)
                refs[media.data] = BLOB_REF_PREFIX + blob.hash
        form = posted_form(item.message)
        posted = _with_refs(form.raw, refs) if refs else form.raw
        sources.append({"seq": item.seq, "format": form.format.value, "posted": posted})
    return sources, list(blobs.values())


# ---- what may be posted, and how it is served back -----------------------------------------

ACCEPTED_MEDIA_TYPES = frozenset(
    {
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "image/heic",
        "image/heif",
        "audio/wav",
        "audio/x-wav",
        "audio/mpeg",
        "audio/mp3",
        "audio/mp4",
        "audio/m4a",
        "audio/aac",
        "audio/ogg",
        "audio/webm",
        "audio/flac",
        "application/pdf",
        "application/octet-stream",
        "application/json",
        "application/msword",
        "application/vnd.ms-excel",
        "application/vnd.ms-powerpoint",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "text/plain",
        "text/csv",
        "text/markdown",
    }
)
FALLBACK_MEDIA_TYPE = "application/octet-stream"
# type/subtype, case aside (RFC 6838's characters), with no parameters, spaces or line breaks
_MEDIA_TYPE_TOKEN = re.compile(
    r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*", re.IGNORECASE | re.ASCII
)


def media_problem(media: Media) -> str | None:
    """Why an inline payload cannot be accepted (None: it can). A payload by link or file id
    is the provider's to fetch and is not checked here."""
    if media.data is None:
        return None
    if media.media_type is not None:
        if not _MEDIA_TYPE_TOKEN.fullmatch(media.media_type):
            return "its media type is not a plain type/subtype token"
        if media.media_type.lower() not in ACCEPTED_MEDIA_TYPES:
            return (
                f"media type {media.media_type} is not accepted (images, audio and documents: "
                "PNG, JPEG, GIF, WebP, HEIC, WAV, MP3, MP4 audio, AAC, Ogg, WebM, FLAC, PDF, "
                "Office, JSON, plain text, CSV, Markdown, octet-stream)"
            )
    try:
        base64.b64decode(media.data, validate=True)
    except (binascii.Error, ValueError):
        return "its data is not valid base64"
    return None


def first_media_problem(messages: Sequence[Message]) -> tuple[int, str] | None:
    """The first message whose inline payload cannot be accepted, and why."""
    for index, message in enumerate(messages):
        for media in message.media:
            problem = media_problem(media)
            if problem is not None:
                return index, problem
    return None


@dataclass(frozen=True)
class ServedAs:
    """How a stored payload goes out: its type and whether a browser may show it in place."""

    media_type: str
    inline: bool


def served_as(media_type: str | None) -> ServedAs:
    """A blob's type as served (stored before the check, an unaccepted type goes out as
    bytes), shown in place only when it is an image or a clip."""
    lowered = (media_type or "").lower()
    served = lowered if lowered in ACCEPTED_MEDIA_TYPES else FALLBACK_MEDIA_TYPE
    return ServedAs(served, served.startswith(("image/", "audio/")))
