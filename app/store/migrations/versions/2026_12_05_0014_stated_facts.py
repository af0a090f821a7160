"""facts.subject and facts.value: what a stated fact is of, and its normalised value

A key fact the user stated (an amount, a day, a party, an identifier) keeps its subject
("pilot budget") and normalised value ("48500 EUR") beside the text the notes show: a later
statement about the same subject supersedes it, and the eval compares values. Both are
conversation text, sealed at rest like the fact's text. Older facts have neither.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("facts", sa.Column("subject", sa.Text(), nullable=True))
    op.add_column("facts", sa.Column("value", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("facts", "value")
    op.drop_column("facts", "subject")
