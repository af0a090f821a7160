"""facts: status, role, ordinal and resolution, for superseded and resolved facts

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "facts", sa.Column("role", sa.String(length=16), server_default="user", nullable=False)
    )
    op.add_column("facts", sa.Column("ordinal", sa.Integer(), nullable=True))
    op.add_column(
        "facts", sa.Column("status", sa.String(length=16), server_default="active", nullable=False)
    )
    op.add_column("facts", sa.Column("resolved_at_turn", sa.Integer(), nullable=True))
    op.create_index(op.f("ix_facts_session_id_status"), "facts", ["session_id", "status"])


def downgrade() -> None:
    op.drop_index(op.f("ix_facts_session_id_status"), table_name="facts")
    op.drop_column("facts", "resolved_at_turn")
    op.drop_column("facts", "status")
    op.drop_column("facts", "ordinal")
    op.drop_column("facts", "role")
