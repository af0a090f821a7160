"""idempotency: a forget empties a stored answer instead of deleting the record

A retry of an answered turn after a forget found no record and stored the turn twice. The
record stays, with no answer, and the retry is refused.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.alter_column("idempotency", "response", existing_type=postgresql.JSONB(), nullable=True)


def downgrade() -> None:
    op.execute("DELETE FROM idempotency WHERE response IS NULL")
    op.alter_column("idempotency", "response", existing_type=postgresql.JSONB(), nullable=False)
