"""Runs Alembic from code (the CLI, the server's start-up and the tests share this)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def alembic_config(url: str) -> Config:
    config = Config(str(PROJECT_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(PROJECT_ROOT / "alembic"))
    config.attributes["database_url"] = url
    return config


def upgrade_head(url: str) -> None:
    command.upgrade(alembic_config(url), "head")


def check_models_match(url: str) -> None:
    """Raises when the models and the migrations disagree (`alembic check`)."""
    command.check(alembic_config(url))
