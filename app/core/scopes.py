"""What an API key may do: one vocabulary for keys, routes, the memory tool and the floor.

`admin` holds every scope. A key without `memory:offload` or `memory:forget` cannot move or
delete anything, whatever its other scopes.
"""

from __future__ import annotations

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
