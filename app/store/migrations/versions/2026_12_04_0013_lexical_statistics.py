"""sessions.lexical_chunks and sessions.lexical_terms: the lexical index's BM25 statistics

BM25 weighs a term by how many of the session's chunks hold it against how many there are,
and a chunk by its length against the session's average. The session row keeps the two
totals (live chunks in the lexical index, the sum of their distinct terms), kept in step by
the statements that write, archive and delete chunks, so a search reads them in one row
instead of counting a large archive. Filled here from the chunks already written.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "sessions",
        sa.Column("lexical_chunks", sa.Integer(), server_default=sa.text("0"), nullable=False),
    )
    op.add_column(
        "sessions",
        sa.Column("lexical_terms", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
    )
    op.execute(
        """
        UPDATE sessions AS s
        SET lexical_chunks = totals.chunks, lexical_terms = totals.terms
        FROM (
            SELECT session_id, count(*) AS chunks, sum(length(lexical)) AS terms
            FROM chunks WHERE superseded_turn IS NULL
            GROUP BY session_id
        ) AS totals
        WHERE s.id = totals.session_id
        """
    )


def downgrade() -> None:
    op.drop_column("sessions", "lexical_terms")
    op.drop_column("sessions", "lexical_chunks")
