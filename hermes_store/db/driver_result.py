"""What a hand-written statement run by the execution seam returns, whichever way it went."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

NO_PARAMETERS: Mapping[str, Any] = {}
"""The parameters of a statement that has none."""


class DriverResult(NamedTuple):
    """What a statement run by :func:`hermes_store.db.execution.driver_execute` returned:
    column names and rows (``None``, ``[]`` for a statement that returns no rows)."""

    names: list[str] | None
    rows: list[Any]
    lastrowid: int | None = None
    """The driver cursor's ``lastrowid`` (SQLite: the rowid an ``INSERT`` just assigned)."""


_new_tuple = tuple.__new__


def cursor_result(cursor: Any) -> DriverResult:
    """What the driver ``cursor`` holds after its statement ran: names and every row."""
    description = cursor.description
    if description is None:
        # tuple.__new__: a NamedTuple's own __new__ is a Python function, a frame more on
        # every INSERT and UPDATE.
        return _new_tuple(DriverResult, (None, [], getattr(cursor, "lastrowid", None)))
    return DriverResult([column[0] for column in description], list(cursor.fetchall()))
