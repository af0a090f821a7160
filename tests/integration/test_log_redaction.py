"""No logged database error carries the conversation's text: the engine hides statement
parameters, and the log formatters leave database messages out (Postgres quotes values in
them) and cut any parameters that another path lets through."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import exc, text
from sqlalchemy.ext.asyncio import create_async_engine

from app.core.errors import UnstorableValue
from app.logs import HIDDEN, JsonFormatter, TextFormatter
from app.store.database import Database, async_url

SECRET = "Quillfeather-9921"
REFUSED = text("SELECT CAST(:value AS integer)")  # the value is text: a data error


def logged(error: BaseException) -> list[str]:
    record = logging.LogRecord(
        "ebbtide.test", logging.ERROR, __file__, 1, "unhandled", None, (type(error), error, None)
    )
    return [formatter.format(record) for formatter in (JsonFormatter(), TextFormatter())]


async def test_the_service_engine_hides_parameters_and_refuses_with_a_4xx_error(
    database_url: str,
) -> None:
    database = Database.connect(database_url, pool_size=1)
    try:
        with pytest.raises(UnstorableValue) as raised:
            async with database.transaction() as db:
                await db.execute(REFUSED, {"value": SECRET})
    finally:
        await database.dispose()
    cause = raised.value.__cause__
    assert isinstance(cause, exc.DataError) and cause.hide_parameters
    # Postgres quotes the value in its own message; the log writes type, SQLSTATE, statement.
    for line in logged(raised.value):
        assert SECRET not in line and "SQLSTATE 22P02" in line and "CAST(" in line


async def test_the_formatters_cut_parameters_that_an_engine_shows(database_url: str) -> None:
    engine = create_async_engine(async_url(database_url))  # parameters shown in its errors
    try:
        with pytest.raises(exc.DataError) as raised:
            async with engine.connect() as connection:
                await connection.execute(REFUSED, {"value": SECRET})
    finally:
        await engine.dispose()
    assert SECRET in str(raised.value)  # what would have been logged
    for line in logged(raised.value):
        assert SECRET not in line and "[SQL: SELECT CAST(" in line


def test_a_parameters_line_in_any_other_message_is_cut() -> None:
    wrapped = RuntimeError(f"insert failed\n[SQL: INSERT …]\n[parameters: ('{SECRET}',)]")
    for line in logged(wrapped):
        assert SECRET not in line and HIDDEN in line
