"""chunks.archived_turn: the first turn that had the chunk in its archive

An offload's chunks are archived at the turn that wrote them; a remembered point at the turn
after the one it followed. The session inspector reads it to tell, for a past turn, whether a
chunk's messages were still in that turn's window or already in the archive. Chunks written
before this column existed leave it empty (the inspector compares write times instead).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("chunks", sa.Column("archived_turn", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("chunks", "archived_turn")
