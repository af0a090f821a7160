"""facts.carried_from and facts.carried_fact_id: a fact a new session started from

A turn may carry a few active facts of another session of the same tenant into its own
(`carry_facts`); the copy keeps the session it came from and that session's fact id (its
source turn is the fact's own `source_turn`), so the notes and the API can say where it was
said, and carrying it again is a no-op.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("facts", sa.Column("carried_from", sa.String(length=256), nullable=True))
    op.add_column("facts", sa.Column("carried_fact_id", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("facts", "carried_fact_id")
    op.drop_column("facts", "carried_from")
