"""Structured logs (docs/DESIGN.md §9): one JSON object per line in production, a readable
line in development. Fields go in `extra={"fields": {...}}`; message text never does unless
the operator turns `log.debug_content` on.

A logged database error never carries the conversation's text: the engine hides statement
parameters, and the formatters write a database error as its type, SQLSTATE and statement
only, because Postgres quotes the offending value in its own message ("invalid input syntax
for type integer: …"). Any `[parameters: …]` line another library writes is cut as well.
"""

from __future__ import annotations

import json
import logging
import re
import traceback
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import psycopg
from sqlalchemy import exc

from app.settings import LogSettings

FIELDS = "fields"
STATEMENT_PARAMETERS = re.compile(r"\[parameters: .*\]$", re.MULTILINE)
HIDDEN = "[parameters: hidden]"


ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


def redacted(text: str) -> str:
    return STATEMENT_PARAMETERS.sub(HIDDEN, text)


def _safe_message(error: BaseException) -> str:
    if isinstance(error, exc.StatementError):
        driver = error.orig
        state = getattr(driver, "sqlstate", None)
        return f"{type(driver).__name__} (SQLSTATE {state}) [SQL: {error.statement}]"
    if isinstance(error, psycopg.Error):
        return f"SQLSTATE {error.sqlstate}"
    return str(error)


def format_error(exc_info: ExcInfo) -> str:
    """The traceback of an exception and its causes, database messages left out."""
    chain: list[BaseException] = []
    error: BaseException | None = exc_info[1]
    while error is not None and error not in chain:
        chain.append(error)
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    parts = []
    for error in reversed(chain):
        frames = "".join(traceback.format_tb(error.__traceback__))
        parts.append(f"Traceback (most recent call last):\n{frames}" if frames else "")
        parts.append(f"{type(error).__module__}.{type(error).__qualname__}: {_safe_message(error)}")
    return "\n".join(part for part in parts if part)


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    value = getattr(record, FIELDS, None)
    return value if isinstance(value, dict) else {}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": redacted(record.getMessage()),
            **fields_of(record),
        }
        if record.exc_info and record.exc_info[1] is not None:
            line["error"] = redacted(format_error(record.exc_info))
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extra = " ".join(f"{k}={v}" for k, v in fields_of(record).items())
        text = f"{self.formatTime(record, '%H:%M:%S')} {record.levelname:<7} {record.getMessage()}"
        text = f"{text} {extra}" if extra else text
        if record.exc_info and record.exc_info[1] is not None:
            text += "\n" + format_error(record.exc_info)
        return redacted(text)


# Libraries that narrate their routine work at INFO: pgserver prints initdb's whole output and
# every pg_ctl call, alembic every plugin it loads and every migration it runs. Their warnings
# and errors still show; `log.level=debug` shows everything.
CHATTY_LIBRARIES = ("pgserver", "alembic")


def configure_logging(settings: LogSettings) -> None:
    """Replaces the root handlers: everything (uvicorn's too) goes out in one format."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if settings.format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.level.upper())
    quiet = logging.DEBUG if root.level <= logging.DEBUG else max(logging.WARNING, root.level)
    for name in CHATTY_LIBRARIES:
        logging.getLogger(name).setLevel(quiet)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
