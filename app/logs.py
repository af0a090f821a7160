"""Structured logs (docs/DESIGN.md §9): one JSON object per line in production, a readable line in
development. Fields go in `extra={"fields": {...}}`; message text never does unless the
operator turns `log.debug_content` on."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from app.settings import LogSettings

FIELDS = "fields"


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    value = getattr(record, FIELDS, None)
    return value if isinstance(value, dict) else {}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **fields_of(record),
        }
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extra = " ".join(f"{k}={v}" for k, v in fields_of(record).items())
        text = f"{self.formatTime(record, '%H:%M:%S')} {record.levelname:<7} {record.getMessage()}"
        text = f"{text} {extra}" if extra else text
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def configure_logging(settings: LogSettings) -> None:
    """Replaces the root handlers: everything (uvicorn's too) goes out in one format."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if settings.format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
