"""sessions keyed by tenant and id: every session key becomes `tenant/id`

Until now one session-id namespace was shared by all tenants: a tenant could squat an id
another would get 404 for, and learn which ids exist. Existing rows keep their data; their
key gains the tenant it always belonged to.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHILDREN = ("messages", "chunks", "notes", "facts", "events", "idempotency", "forget_requests")
KEY_CHARS = 200
OLD_ID_CHARS = 128


def _drop_foreign_keys() -> None:
    for table in CHILDREN:
        op.drop_constraint(f"fk_{table}_session_id_sessions", table, type_="foreignkey")


def _create_foreign_keys() -> None:
    for table in CHILDREN:
        op.create_foreign_key(
            f"fk_{table}_session_id_sessions",
            table,
            "sessions",
            ["session_id"],
            ["id"],
            ondelete="CASCADE",
        )


def _widen(chars: int) -> None:
    op.alter_column("sessions", "id", type_=sa.String(chars))
    for table in CHILDREN:
        op.alter_column(table, "session_id", type_=sa.String(chars))


def upgrade() -> None:
    _drop_foreign_keys()
    _widen(KEY_CHARS)
    for table in CHILDREN:
        op.execute(
            f"UPDATE {table} AS child SET session_id = s.tenant_id || '/' || child.session_id "
            "FROM sessions AS s WHERE s.id = child.session_id"
        )
    op.execute("UPDATE sessions SET id = tenant_id || '/' || id")
    _create_foreign_keys()


def downgrade() -> None:
    """Fails on a primary key when two tenants came to use the same id: that state has no
    form in the old schema."""
    _drop_foreign_keys()
    for table in CHILDREN:
        op.execute(
            f"UPDATE {table} AS child "
            "SET session_id = substring(child.session_id from length(s.tenant_id) + 2) "
            "FROM sessions AS s WHERE s.id = child.session_id"
        )
    op.execute("UPDATE sessions SET id = substring(id from length(tenant_id) + 2)")
    _widen(OLD_ID_CHARS)
    _create_foreign_keys()
