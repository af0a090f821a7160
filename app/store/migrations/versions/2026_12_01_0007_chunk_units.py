"""chunk_units: a vector per message (and per window of sentences of a long one)

A chunk's single mean vector diluted a one-sentence fact among the turns around it; recall
now scores a chunk by its best units. Chunks written before have no units: they are marked
for re-embedding (`ebbtide reembed` gives each one unit over its whole text) and are found
by the lexical channel until then. Sessions remember their last prompt without recalled text,
which the watermark measures now that recall has a share of the budget of its own.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import pgvector.sqlalchemy
import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "chunk_units",
        sa.Column("session_id", sa.String(length=200), nullable=False),
        sa.Column("chunk_id", sa.String(length=40), nullable=False),
        sa.Column("ord", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("said_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("text_start", sa.Integer(), nullable=False),
        sa.Column("text_end", sa.Integer(), nullable=False),
        sa.Column("speaker", sa.String(length=256), nullable=True),
        sa.Column("embedding", pgvector.sqlalchemy.Vector(dim=384), nullable=True),
        sa.Column("embedding_model", sa.String(length=128), nullable=True),
        sa.ForeignKeyConstraint(
            ["session_id", "chunk_id"],
            ["chunks.session_id", "chunks.id"],
            name=op.f("fk_chunk_units_session_id_chunks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "chunk_id", "ord", name=op.f("pk_chunk_units")),
    )
    op.create_index(
        "ix_chunk_units_embedding_hnsw",
        "chunk_units",
        ["embedding"],
        unique=False,
        postgresql_using="hnsw",
        postgresql_ops={"embedding": "vector_ip_ops"},
    )
    op.create_index(
        op.f("ix_chunk_units_session_id_said_at"),
        "chunk_units",
        ["session_id", "said_at"],
        unique=False,
    )
    op.execute("UPDATE chunks SET needs_embedding = true")
    op.add_column("sessions", sa.Column("last_window_estimate", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("sessions", "last_window_estimate")
    op.drop_index(op.f("ix_chunk_units_session_id_said_at"), table_name="chunk_units")
    op.drop_index("ix_chunk_units_embedding_hnsw", table_name="chunk_units")
    op.drop_table("chunk_units")
