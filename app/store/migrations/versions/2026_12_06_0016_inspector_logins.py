"""inspector_logins: server-side logins to the inspector

The inspector's cookie held the API key itself, so logging out ended nothing and another
site could end a login with a form post. A login is now a random token (stored hashed) tied
to the key, with a CSRF token its forms send back; logout deletes it and revoking the key
ends it.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "inspector_logins",
        sa.Column("token_hash", sa.String(length=64), primary_key=True),
        sa.Column(
            "key_id",
            sa.BigInteger(),
            sa.ForeignKey("api_keys.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("csrf", sa.String(length=64), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_inspector_logins_key_id", "inspector_logins", ["key_id"])


def downgrade() -> None:
    op.drop_index("ix_inspector_logins_key_id", table_name="inspector_logins")
    op.drop_table("inspector_logins")
