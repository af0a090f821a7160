"""Images, clips and files of offloaded messages: stored once per session, by content hash.

An offload keeps every message's posted form in its chunk (`sources`), so the parts survive,
not only their words. A base64 payload inside that form is replaced by a reference
`ebbtide-blob:sha256:<hash>` and its bytes go to the session's blobs, where a payload posted
twice is kept once. The chunk's text names each payload by kind, size and hash (chunker).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.core.formats import posted_form
from app.core.messages import JsonObject
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
