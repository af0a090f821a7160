"""embedding queue: offloads write chunks without vectors, a worker embeds them

A chunk that awaits its vectors has `needs_embedding` set (as chunks written while the
embedder was down always had); a worker claims it by setting `embedding_claimed_until`
(`SELECT … FOR UPDATE SKIP LOCKED`), and a claim that passes that time without the vectors
written is free to claim again. Two partial indexes keep the queue's statements small: the
oldest pending chunks for the worker, a session's pending chunks for its recall report.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PENDING = sa.text("needs_embedding AND superseded_turn IS NULL")


def upgrade() -> None:
    op.add_column(
        "chunks", sa.Column("embedding_claimed_until", sa.DateTime(timezone=True), nullable=True)
    )
    op.create_index(
        "ix_chunks_pending_created_at", "chunks", ["created_at"], postgresql_where=PENDING
    )
    op.create_index(
        "ix_chunks_pending_session_id", "chunks", ["session_id"], postgresql_where=PENDING
    )


def downgrade() -> None:
    op.drop_index("ix_chunks_pending_session_id", table_name="chunks")
    op.drop_index("ix_chunks_pending_created_at", table_name="chunks")
    op.drop_column("chunks", "embedding_claimed_until")
