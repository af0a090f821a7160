"""message formats: messages kept as posted, C0 as posted, offloaded media by hash, recalled
blocks as history

A message is stored as the client posted it (`format`, `posted`), so it can come back key for
key; rows written before keep their OpenAI columns and are read as OpenAI messages. A recalled
block stays on the message it was injected before until the next offload. Offloaded chunks
keep their messages' posted forms (`sources`), with images, clips and files stored once per
session in `blobs`.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("format", sa.String(length=16), nullable=True))
    op.add_column("messages", sa.Column("posted", sa.Text(), nullable=True))
    op.add_column("messages", sa.Column("recalled", sa.Text(), nullable=True))
    op.add_column(
        "messages",
        sa.Column("recalled_tokens", sa.Integer(), server_default="0", nullable=False),
    )
    op.add_column(
        "messages",
        sa.Column("recalled_chunk_ids", postgresql.ARRAY(sa.String(length=40)), nullable=True),
    )
    op.add_column(
        "sessions",
        sa.Column("system_posted", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    )
    op.add_column(
        "chunks", sa.Column("sources", postgresql.JSONB(astext_type=sa.Text()), nullable=True)
    )
    op.add_column(
        "chunks",
        sa.Column("blob_hashes", postgresql.ARRAY(sa.String(length=64)), nullable=True),
    )
    op.create_table(
        "blobs",
        sa.Column("session_id", sa.String(length=200), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("media_type", sa.String(length=128), nullable=True),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_blobs_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "hash", name=op.f("pk_blobs")),
    )


def downgrade() -> None:
    op.drop_table("blobs")
    op.drop_column("chunks", "blob_hashes")
    op.drop_column("chunks", "sources")
    op.drop_column("sessions", "system_posted")
    for column in ("recalled_chunk_ids", "recalled_tokens", "recalled", "posted", "format"):
        op.drop_column("messages", column)
