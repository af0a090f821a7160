"""Who is calling (docs/DESIGN.md §11): bearer API keys bound to one tenant with scopes.

Keys are random, shown once at creation and stored as SHA-256 hashes (a key has 192 bits of
entropy, so a fast hash is enough). With no active key in the database the service is in
single-tenant development mode: every caller is the `local` tenant with read and write
scopes, and `ebbtide serve` refuses to listen anywhere but loopback.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from app.core.errors import Forbidden, Unauthenticated
from app.core.scopes import DEFAULT_SCOPES, Scope, grants, tenant_name
from app.services.context import ServiceContext
from app.store import keys as key_store
from app.store.models import DEFAULT_TENANT

KEY_PREFIX = "ebt_"
PREFIX_CHARS = 12


class UnknownScope(ValueError):
    pass


@dataclass(frozen=True)
class Principal:
    tenant_id: str
    scopes: frozenset[Scope]
    key_prefix: str = "development"  # names the caller in audit events, never the key

    def require(self, scope: Scope) -> None:
        if not grants(self.scopes, scope):
            raise Forbidden(f"this key lacks the {scope} scope", scope=scope.value)


DEVELOPMENT = Principal(DEFAULT_TENANT, frozenset(DEFAULT_SCOPES))


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


async def create_key(ctx: ServiceContext, tenant_id: str, scopes: Sequence[str]) -> str:
    """A new key for the tenant (created if new, its name in one form: `tenant_name`); the
    only time the key is visible."""
    unknown = set(scopes) - set(Scope)
    if unknown:
        valid = ", ".join(Scope)
        raise UnknownScope(f"unknown scopes {sorted(unknown)}; valid: {valid}")
    tenant_id = tenant_name(tenant_id)
    key = KEY_PREFIX + secrets.token_urlsafe(24)
    async with ctx.database.transaction() as db:
        await key_store.ensure_tenant(db, tenant_id)
        await key_store.add_key(db, tenant_id, hash_key(key), key[:PREFIX_CHARS], scopes)
    return key


async def revoke_key(ctx: ServiceContext, key_or_prefix: str) -> int:
    """Revokes by the key itself or by its prefix (as listed); the number revoked."""
    target = hash_key(key_or_prefix) if len(key_or_prefix) > PREFIX_CHARS else key_or_prefix
    async with ctx.database.transaction() as db:
        return await key_store.revoke(db, target)


async def keys_exist(ctx: ServiceContext) -> bool:
    async with ctx.database.transaction() as db:
        return await key_store.any_active_key(db)


async def authenticate(
    ctx: ServiceContext, bearer: str | None, *, how: str = "Authorization: Bearer <key>"
) -> Principal:
    """The caller of `bearer` (None: no key sent); `how` says where a key goes when one is
    needed and missing."""
    async with ctx.database.transaction() as db:
        if bearer is None:
            if await key_store.any_active_key(db):
                raise Unauthenticated(f"send {how}")
            return DEVELOPMENT
        key = await key_store.active_key(db, hash_key(bearer))
    if key is None:
        raise Unauthenticated("unknown or revoked API key")
    return Principal(key.tenant_id, frozenset(Scope(s) for s in key.scopes), key.prefix)


# ---- logins to the inspector ----------------------------------------------------------------


@dataclass(frozen=True)
class InspectorCaller:
    """Who is looking at the inspector, and the CSRF token their forms send back (empty in
    development mode, where there is no login to protect)."""

    principal: Principal
    csrf: str


LOGIN_ENDED = (
    "no such login, or it ended (logged out, expired, or its key was revoked): log in at /ui/login"
)


async def open_inspector_login(ctx: ServiceContext, key: str) -> tuple[str, str]:
    """A new login for an active key: a random token for the cookie (stored hashed, never
    the key) and the CSRF token of its forms."""
    token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(24)
    expires_at = ctx.clock() + timedelta(hours=ctx.settings.inspector.login_hours)
    async with ctx.database.transaction() as db:
        opened = await key_store.add_inspector_login(
            db, hash_key(token), hash_key(key), csrf, expires_at
        )
    if not opened:
        raise Unauthenticated("unknown or revoked API key")
    return token, csrf


async def inspector_caller(ctx: ServiceContext, token: str | None) -> InspectorCaller:
    """The caller of an inspector request by its login cookie (None: none sent)."""
    async with ctx.database.transaction() as db:
        if token is None:
            if await key_store.any_active_key(db):
                raise Unauthenticated("log in at /ui/login")
            return InspectorCaller(DEVELOPMENT, "")
        found = await key_store.inspector_login(db, hash_key(token), ctx.clock())
    if found is None:
        raise Unauthenticated(LOGIN_ENDED)
    key, csrf = found
    scopes = frozenset(Scope(s) for s in key.scopes)
    return InspectorCaller(Principal(key.tenant_id, scopes, key.prefix), csrf)


async def end_inspector_login(ctx: ServiceContext, token: str | None, csrf: str) -> None:
    """Logs out: the login of `token` ends, if the form sent its CSRF token (a post from
    another site cannot end it)."""
    refused = Forbidden("logging out takes the form's CSRF token", field="csrf")
    if token is None:
        await inspector_caller(ctx, None)  # with keys: a 401, as for any page's call
        raise refused  # development mode has no login to end
    async with ctx.database.transaction() as db:
        found = await key_store.inspector_login(db, hash_key(token), ctx.clock())
        if found is None:
            raise Unauthenticated(LOGIN_ENDED)
        if not secrets.compare_digest(found[1], csrf):
            raise refused
        await key_store.end_inspector_login(db, hash_key(token))
