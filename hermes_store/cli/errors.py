"""The errors the command line reports as one line and exit status 1.

Expected failures — a session that does not exist, a file that cannot be read, a
``StoreError`` from the store — never show a traceback: :func:`as_cli_error` turns them
into a :class:`CliError`, which click prints as ``Error: <message>``. Usage mistakes
stay click's ``UsageError`` (exit status 2).
"""

from __future__ import annotations

import json
import sqlite3

import click
from sqlalchemy import exc as sa_exc

from hermes_store.db.server_errors import first_line
from hermes_store.db.sqlite_errors import translate
from hermes_store.errors import StoreError

__all__ = ["EXPECTED_ERRORS", "CliError", "SessionNotFound", "as_cli_error"]


class CliError(click.ClickException):
    """A user-facing failure: printed as one line, exit status 1."""

    exit_code = 1


class SessionNotFound(CliError):
    """No session matches the id, title or prefix the user gave."""


EXPECTED_ERRORS: tuple[type[BaseException], ...] = (
    StoreError,
    ValueError,
    OSError,
    sqlite3.Error,
    sa_exc.DBAPIError,
)
"""Exceptions that mean "the input or the environment is wrong", not "hermes_store has a bug"."""


def as_cli_error(exc: BaseException) -> CliError:
    """The one-line :class:`CliError` that reports ``exc`` to the user."""
    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, sa_exc.DBAPIError):
        translated = translate(exc, "accessing the database")
        if translated is not exc:
            return CliError(first_line(translated))
        return CliError(f"database error: {first_line(exc)}")
    if isinstance(exc, sqlite3.Error):
        translated = translate(exc, "accessing the database")
        if translated is not exc:
            return CliError(first_line(translated))
        return CliError(f"database error: {first_line(exc)}")
    if isinstance(exc, json.JSONDecodeError):
        return CliError(f"invalid JSON: {exc}")
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return CliError(f"{exc.strerror or exc}{where}")
    return CliError(first_line(exc))
