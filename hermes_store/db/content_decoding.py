"""Message content mapped back from the backend's storage form in rows the execution seam
fetched by hand, as :class:`hermes_store.db.column_types.MessageContent` maps a typed column."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Dialect

from hermes_store.db.column_types import MessageContent

MESSAGE_CONTENT = MessageContent()
"""The content column type whose result processing decodes stored content."""


def decode_content(dialect: Dialect, names: list[str], rows: list[Any], content: Sequence[str]) -> list[Any]:
    """``rows`` (columns ``names``) with the columns named in ``content`` decoded; the rows
    as they are when the dialect stores content as it is read."""
    to_python = MESSAGE_CONTENT.result_processor(dialect, None)
    if to_python is None:  # nothing to decode on this dialect
        return rows
    positions = [names.index(name) for name in content]
    decoded = [list(row) for row in rows]
    for row in decoded:
        for position in positions:
            row[position] = to_python(row[position])
    return decoded
