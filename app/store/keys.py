"""API keys and tenants (reference tables: not distributed by session)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import delete, exists, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.store.models import ApiKey, InspectorLogin, Tenant


async def ensure_tenant(db: AsyncSession, tenant_id: str) -> None:
    await db.execute(insert(Tenant).values(id=tenant_id, name=tenant_id).on_conflict_do_nothing())


async def add_key(
    db: AsyncSession, tenant_id: str, key_hash: str, prefix: str, scopes: Sequence[str]
) -> None:
    db.add(ApiKey(tenant_id=tenant_id, key_hash=key_hash, prefix=prefix, scopes=list(scopes)))
    await db.flush()


async def active_key(db: AsyncSession, key_hash: str) -> ApiKey | None:
    result = await db.execute(
        select(ApiKey).where(ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None))
    )
    return result.scalar_one_or_none()


async def any_active_key(db: AsyncSession) -> bool:
    return bool(await db.scalar(select(exists().where(ApiKey.revoked_at.is_(None)))))


async def revoke(db: AsyncSession, prefix_or_hash: str) -> int:
    result = await db.execute(
        update(ApiKey)
        .where(
            or_(ApiKey.prefix == prefix_or_hash, ApiKey.key_hash == prefix_or_hash),
            ApiKey.revoked_at.is_(None),
        )
        .values(revoked_at=datetime.now(UTC))
    )
    return int(getattr(result, "rowcount", 0))


async def add_inspector_login(
    db: AsyncSession, token_hash: str, key_hash: str, csrf: str, expires_at: datetime
) -> bool:
    """A login for the active key `key_hash` (False: no such key, nothing written)."""
    key = await active_key(db, key_hash)
    if key is None:
        return False
    db.add(InspectorLogin(token_hash=token_hash, key_id=key.id, csrf=csrf, expires_at=expires_at))
    await db.flush()
    return True


async def inspector_login(
    db: AsyncSession, token_hash: str, now: datetime
) -> tuple[ApiKey, str] | None:
    """The key of a live login (its key not revoked, not expired) and the login's CSRF token."""
    row = (
        await db.execute(
            select(ApiKey, InspectorLogin.csrf)
            .join(InspectorLogin, InspectorLogin.key_id == ApiKey.id)
            .where(
                InspectorLogin.token_hash == token_hash,
                InspectorLogin.expires_at > now,
                ApiKey.revoked_at.is_(None),
            )
        )
    ).first()
    return (row[0], row[1]) if row is not None else None


async def end_inspector_login(db: AsyncSession, token_hash: str) -> int:
    result = await db.execute(delete(InspectorLogin).where(InspectorLogin.token_hash == token_hash))
    return int(getattr(result, "rowcount", 0))
