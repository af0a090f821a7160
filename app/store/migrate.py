"""Runs Alembic from code (the CLI, the server's start-up and the tests share this).

The migrations ship inside the package (`app/store/migrations`) and are found through
`importlib.resources`, so an installed wheel migrates without the source tree or an
`alembic.ini` (that file serves only the plain `alembic` command in a checkout).
"""

from __future__ import annotations

from importlib import resources

from alembic import command
from alembic.config import Config

MIGRATIONS = "app.store.migrations"


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(resources.files(MIGRATIONS)))
    config.set_main_option("path_separator", "os")
    config.attributes["database_url"] = url
    return config


def upgrade_head(url: str) -> None:
    command.upgrade(alembic_config(url), "head")


def check_models_match(url: str) -> None:
    """Raises when the models and the migrations disagree (`alembic check`)."""
    command.check(alembic_config(url))
