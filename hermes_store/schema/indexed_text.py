"""The text a message is indexed under: its content, tool name and tool-call JSON.

One definition for the live code: the search queries of both backends (substring terms
are checked in it, PostgreSQL's expression indexes are matched on it) and ``doctor``
(which compares the FTS5 tables with it and rebuilds them from it). The revisions that
built the indexes keep frozen copies of their own, as a revision never changes; this is
the expression they froze, so the two must stay equal.
"""

from __future__ import annotations


def indexed_text(prefix: str = "") -> str:
    """SQL for ``content || ' ' || tool_name || ' ' || tool_calls``, a NULL counting as ``''``.

    ``prefix`` qualifies the columns: ``"m."`` for a query over ``messages m``, ``"new."``
    in a trigger, ``""`` for the bare columns.
    """
    return (
        f"COALESCE({prefix}content, '') || ' ' || COALESCE({prefix}tool_name, '') || ' ' || "
        f"COALESCE({prefix}tool_calls, '')"
    )


INDEXED_TEXT = f"({indexed_text('m.')})"
"""The indexed text of ``messages m``, parenthesised to be used as one operand."""
