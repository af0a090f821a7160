"""A diverging whole history archives the stored branch (app/store/transcript.py): what the
branch said leaves the window, the facts and the notes, and what it had replaced comes back."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.messages import Message
from app.core.plan import TurnInput
from app.services.context import ServiceContext
from app.services.sessions import session_status
from app.services.turns import run_turn
from app.store.models import DEFAULT_TENANT
from tests.builders import assistant, user

NINGBO = user("Only ship from the Ningbo warehouse.")
REPLY = assistant("Noted.")


async def whole(ctx: ServiceContext, history: list[Message]) -> None:
    await run_turn(
        ctx,
        TurnInput(
            session_id="b1",
            tenant_id=DEFAULT_TENANT,
            messages=history,
            model="gpt-4o",
            whole_history=True,
        ),
    )


async def active_facts(ctx: ServiceContext) -> list[str]:
    status = await session_status(ctx, DEFAULT_TENANT, "b1")
    return [fact.text for fact in status.facts]


async def test_a_branch_retires_its_facts_and_restores_the_ones_they_replaced(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    await whole(ctx, [NINGBO])
    change = user("Change of plan: only ship from the Shanghai warehouse instead of Ningbo.")
    await whole(ctx, [NINGBO, REPLY, change])
    assert [f.split(" (replaces")[0] for f in await active_facts(ctx)] == [
        "Change of plan: only ship from the Shanghai warehouse instead of Ningbo"
    ]
    # The client takes the change back: its history goes on from the first reply.
    await whole(ctx, [NINGBO, REPLY, user("What is the status?")])
    assert await active_facts(ctx) == ["Only ship from the Ningbo warehouse"]
    states = await connection.execute(
        text("SELECT seq, state FROM messages WHERE session_id = 'local/b1' ORDER BY seq")
    )
    assert [state for _, state in states] == [
        "window",
        "superseded",  # the reply, which opened turn 2, archived with it ...
        "superseded",
        "window",  # ... and stored again from the client's copy
        "window",
    ]
    status = await session_status(ctx, DEFAULT_TENANT, "b1")
    assert status.counts.superseded_messages == 2
    # the turn after the branch rendered the notes again, without what the branch said
    assert status.notes is not None and status.notes.text is not None
    assert "Ningbo" in status.notes.text and "Shanghai" not in status.notes.text
