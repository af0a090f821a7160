"""pgvector brought to the library's version

A data folder moved from Postgres 16 to 18 by `ebbtide engine upgrade` keeps the pgvector
0.6 catalog entries it was written with; `ALTER EXTENSION vector UPDATE` brings them to the
installed library's version (0.8 on the embedded engine), whose HNSW iterative scans the
vector channel uses. Nothing to do where the versions already agree.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _vector_behind(connection: sa.Connection) -> bool:
    row = connection.execute(
        sa.text(
            "SELECT e.extversion <> a.default_version FROM pg_extension AS e "
            "JOIN pg_available_extensions AS a ON a.name = e.extname WHERE e.extname = 'vector'"
        )
    ).first()
    return bool(row and row[0])


def upgrade() -> None:
    if _vector_behind(op.get_bind()):
        op.execute("ALTER EXTENSION vector UPDATE")


def downgrade() -> None:
    """An extension is never downgraded: the older library is no longer installed."""
