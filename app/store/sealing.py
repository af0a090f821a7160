"""Encryption at rest of conversation text (docs/DESIGN.md §7), done by the column types.

Every column that holds what users or tools wrote (message content and tool calls, chunk
text, facts, notes, event payloads, replayed responses, the system prompt) is declared
`SealedText` or `SealedJson`. With keys configured, values are written as Fernet tokens behind
`SEALED_PREFIX`; without keys they are written as they are. Reading opens either form, so
encryption can be switched on over existing data, and `ebbtide encryption rotate` re-writes
every row under the first (newest) key.

The keys live in one process-wide `Sealer` rather than being passed to each repository: the
column type is the only place no future query can forget. The lexical index cannot be
encrypted (Postgres must match it), so with keys its terms are replaced by keyed hashes
(`blind_terms`) and queries are hashed the same way; vectors are stored as they are.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from sqlalchemy import Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from app.core.errors import EncryptionKeyMissing, EncryptionKeyRejected, InvalidEncryptionKey

SEALED_PREFIX = "ebbtide:fernet:"
BLIND_TERM_HEX = 24  # 96 bits of HMAC-SHA256: no collisions within one session's terms


class Sealer:
    """Fernet keys, newest first: the first seals, any of them opens."""

    def __init__(self, keys: Sequence[str]) -> None:
        if not keys:
            raise InvalidEncryptionKey("at least one key is needed")
        try:
            fernets = [Fernet(key.strip().encode()) for key in keys]
        except ValueError as error:
            raise InvalidEncryptionKey(
                "an encryption key is not a Fernet key (32 url-safe base64-encoded bytes; "
                "`ebbtide encryption new-key` makes one)"
            ) from error
        self._fernet = MultiFernet(fernets)
        self._index_key = hashlib.sha256(b"ebbtide-lexical:" + keys[0].strip().encode()).digest()

    def seal(self, text: str) -> str:
        return SEALED_PREFIX + self._fernet.encrypt(text.encode()).decode()

    def open(self, stored: str) -> str:
        try:
            return self._fernet.decrypt(stored.removeprefix(SEALED_PREFIX).encode()).decode()
        except InvalidToken as error:
            raise EncryptionKeyRejected(
                "stored text was sealed with a key that is not configured"
            ) from error

    def blind(self, term: str) -> str:
        return hmac.new(self._index_key, term.encode(), hashlib.sha256).hexdigest()[:BLIND_TERM_HEX]


_active: Sealer | None = None


def use_sealer(sealer: Sealer | None) -> None:
    """Sets the process's keys (None: write plain text). Called once at start-up."""
    global _active
    _active = sealer


def active_sealer() -> Sealer | None:
    return _active


def sealer_for(keys: Sequence[str]) -> Sealer | None:
    return Sealer(keys) if keys else None


def new_key() -> str:
    return Fernet.generate_key().decode()


def is_sealed(stored: str) -> bool:
    return stored.startswith(SEALED_PREFIX)


def _open(stored: str) -> str:
    if _active is None:
        raise EncryptionKeyMissing(
            "stored text is encrypted but no key is configured (EBBTIDE_ENCRYPTION__KEYS)"
        )
    return _active.open(stored)


def blind_terms(terms: Sequence[str]) -> list[str]:
    """Lexical terms as stored and searched: keyed hashes with encryption on, else as given."""
    if _active is None:
        return list(terms)
    return [_active.blind(term) for term in terms]


class SealedText(TypeDecorator[str]):
    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        if value is None or _active is None:
            return value
        return _active.seal(value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> str | None:
        if value is None or not is_sealed(value):
            return value
        return _open(value)


class SealedJson(TypeDecorator[Any]):
    """JSONB; sealed, the value is stored as one JSON string holding the token."""

    impl = JSONB
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None or _active is None:
            return value
        return _active.seal(json.dumps(value, ensure_ascii=False))

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        if isinstance(value, str) and is_sealed(value):
            return json.loads(_open(value))
        return value
