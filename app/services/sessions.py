"""Read-only use cases: a session's status and one offloaded chunk, raw."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.budget import level_for
from app.core.errors import ChunkNotFound, SessionNotFound
from app.core.plan import POLICY_FIELDS, session_budget, session_policy
from app.core.tokens import calibrated, window_for_model
from app.services.context import ServiceContext
from app.services.notes import active_facts_view
from app.services.policies import plan_policy
from app.store import chunks as chunk_store
from app.store import events as event_store
from app.store import facts as fact_store
from app.store import sessions as session_store
from app.store.models import ChunkRow, SessionRow


async def owned_session(db: AsyncSession, tenant_id: str, session_id: str) -> SessionRow:
    row = await session_store.get_session(db, session_id)
    if row is None or row.tenant_id != tenant_id:
        raise SessionNotFound("no such session", session_id=session_id)
    return row


async def locked_session(db: AsyncSession, tenant_id: str, session_id: str) -> SessionRow:
    """The tenant's session under its row lock: writes outside a turn queue with the turns."""
    row = await session_store.lock_session(db, session_id)
    if row is None or row.tenant_id != tenant_id:
        raise SessionNotFound("no such session", session_id=session_id)
    return row


def watermark_view(ctx: ServiceContext, row: SessionRow) -> dict[str, Any]:
    """Window, budget, prompt size and levels of a session, as its last turn left them."""
    window = row.context_window or window_for_model(row.model)
    if window is None:
        return {"context_window": None}
    rules = plan_policy(ctx.settings)
    budget = session_budget(rules, window, row.reserve_tokens)
    policy = session_policy(rules, row.policy)
    prompt = calibrated(row.last_prompt_estimate or 0, row.calibration_ratio)
    return {
        "context_window": window,
        "reserve_tokens": budget.reserve,
        "budget": budget.available,
        "prompt_tokens": prompt,
        "watermark": round(prompt / budget.available, 4),
        "level": level_for(prompt, budget, policy).value,
        "levels": {
            "offload_at": budget.line(policy.offload_ratio),
            "emergency_at": budget.line(policy.emergency_ratio),
            "target": budget.line(policy.target_ratio),
        },
        "policy": {n: getattr(policy, n) for n in POLICY_FIELDS},
        "calibration_ratio": round(row.calibration_ratio, 4),
    }


async def session_status(ctx: ServiceContext, tenant_id: str, session_id: str) -> dict[str, Any]:
    async with ctx.database.transaction() as db:
        row = await owned_session(db, tenant_id, session_id)
        counts = await session_store.counts(db, session_id)
        notes = await session_store.notes_for(db, session_id)
        last_offload = (
            await event_store.turn_event(db, session_id, row.last_offload_turn)
            if row.last_offload_turn is not None
            else None
        )
        facts = await fact_store.current_facts(db, session_id, ctx.settings.notes.recent_resolved)
    return {
        "session_id": row.id,
        "turns": row.turn_count,
        "model": row.model,
        **watermark_view(ctx, row),
        "counts": counts,
        "notes": {
            "text": notes.rendered,
            "tokens": notes.tokens,
            "needs_rebuild": notes.needs_rebuild,
        }
        if notes
        else None,
        "facts": active_facts_view(facts),
        "last_offload": {
            "turn": last_offload.turn,
            **last_offload.payload["offload"],
            "at": last_offload.created_at.isoformat(),
        }
        if last_offload
        else None,
    }


def chunk_view(chunk: ChunkRow) -> dict[str, Any]:
    return {
        "chunk_id": chunk.id,
        "session_id": chunk.session_id,
        "kind": chunk.kind,
        "turn_range": [chunk.turn_start, chunk.turn_end],
        "roles": chunk.roles,
        "first_ts": chunk.first_ts.isoformat(),
        "last_ts": chunk.last_ts.isoformat(),
        "tokens": chunk.tokens,
        "summary_hint": chunk.summary_hint,
        "embedding_model": chunk.embedding_model,
        "needs_embedding": chunk.needs_embedding,
        "content_hash": chunk.content_hash,
        "raw_text": chunk.raw_text,
    }


async def read_chunk(
    ctx: ServiceContext, tenant_id: str, session_id: str, chunk_id: str
) -> dict[str, Any]:
    async with ctx.database.transaction() as db:
        await owned_session(db, tenant_id, session_id)
        chunk = await chunk_store.get_chunk(db, session_id, chunk_id)
    if chunk is None:
        raise ChunkNotFound("no such chunk in this session", chunk_id=chunk_id)
    return chunk_view(chunk)


async def list_events(
    ctx: ServiceContext,
    tenant_id: str,
    session_id: str,
    *,
    after: int,
    limit: int,
    kind: str | None,
) -> dict[str, Any]:
    """A page of the session's event log; `next_after` continues it (None: no more now)."""
    async with ctx.database.transaction() as db:
        await owned_session(db, tenant_id, session_id)
        rows = await event_store.events_after(db, session_id, after, limit, kind)
    return {
        "events": [
            {
                "id": row.id,
                "turn": row.turn,
                "kind": row.kind,
                "created_at": row.created_at.isoformat(),
                "payload": row.payload,
            }
            for row in rows
        ],
        "next_after": rows[-1].id if len(rows) == limit else None,
    }
