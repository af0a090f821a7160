"""What an API key may do: one vocabulary for keys, routes, the memory tool and the floor.

`admin` holds every scope. A key without `memory:offload` or `memory:forget` cannot move or
delete anything, whatever its other scopes.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection
from enum import StrEnum


class Scope(StrEnum):
    READ = "memory:read"
    WRITE = "memory:write"
    OFFLOAD = "memory:offload"
    FORGET = "memory:forget"
    ADMIN = "admin"


DEFAULT_SCOPES = (Scope.READ, Scope.WRITE)


def grants(held: Collection[str], needed: Scope) -> bool:
    return needed in held or Scope.ADMIN in held


# A tenant's name: 1-64 of A-Z a-z 0-9 . _ - after NFKC and trimming, so "tenantA", " tenantA "
# and the full-width "ｔｅｎａｎｔＡ" are one tenant and a "/" can never split a session key.
TENANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class InvalidTenantName(ValueError):
    """A tenant name outside the documented character set (after NFKC and trimming)."""


def tenant_name(raw: str) -> str:
    """The one form a tenant's name takes (NFKC, trimmed); refused outside the character set."""
    name = unicodedata.normalize("NFKC", raw).strip()
    if not TENANT_NAME.fullmatch(name):
        raise InvalidTenantName(
            f"tenant names are 1-64 of A-Z a-z 0-9 . _ - starting with a letter or digit "
            f"(after NFKC and trimming); got {raw!r}"
        )
    return name
