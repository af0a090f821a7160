"""proxy transcript: a digest per message, superseded branches

The proxy matches a client's whole history against the stored transcript by a digest of what
each message says (`messages.digest`; rows from before have none and match nothing). When a
client's history diverges, the stored messages from that point are kept with state
`superseded`, and the chunks they were offloaded into are marked with the turn that archived
them (`chunks.superseded_turn`): readable by id, out of recall.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("digest", sa.String(length=64), nullable=True))
    op.add_column("chunks", sa.Column("superseded_turn", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("chunks", "superseded_turn")
    op.drop_column("messages", "digest")
