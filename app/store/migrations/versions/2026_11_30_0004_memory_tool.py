"""memory tool: pending forget requests, a manual offload target, remember rate index

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("offload_until_tokens", sa.Integer(), nullable=True))
    op.create_table(
        "forget_requests",
        sa.Column("session_id", sa.String(length=128), nullable=False),
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("chunk_ids", postgresql.ARRAY(sa.String(length=40)), nullable=False),
        sa.Column("requested_by", sa.String(length=16), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_forget_requests_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "id", name=op.f("pk_forget_requests")),
    )
    op.create_index(
        op.f("ix_chunks_session_id_kind_created_at"),
        "chunks",
        ["session_id", "kind", "created_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_chunks_session_id_kind_created_at"), table_name="chunks")
    op.drop_table("forget_requests")
    op.drop_column("sessions", "offload_until_tokens")
