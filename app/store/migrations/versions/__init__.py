"""Alembic revisions, oldest first (date + slug file names)."""
