"""API keys and tenants (reference tables: not distributed by session)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import exists, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.store.models import ApiKey, Tenant


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
