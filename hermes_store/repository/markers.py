"""SQL tests for the lineage markers upstream Hermes keeps in ``sessions.model_config``.

``model_config`` is JSON text. Two of its top-level keys say what kind of child a session
is: ``_branched_from`` (a ``/branch`` of its parent, listed like a root) and
``_delegate_from`` (a sub-agent run, never listed). A key counts when it holds a value
other than JSON ``null``.

The column is plain text, so a row may hold anything, and a listing must never fail
because of one bad row:

* SQLite parses only rows that mention the key and that ``json_valid`` accepts; invalid
  JSON carries no marker;
* PostgreSQL 15 has no JSON validity test in SQL (``IS JSON`` arrived in 16) and a failed
  ``::jsonb`` cast aborts the statement, so there the key is recognised in the text: the
  quoted key, a colon, and a value that does not start with ``null``. Text that is not
  JSON but spells a marker out, or a marker key inside a nested object, therefore counts
  there and not on SQLite. For the objects Hermes writes (``json.dumps`` of a flat dict)
  both tests agree.
"""

from __future__ import annotations

from hermes_store.db.backends import backend_for
from hermes_store.db.execution import Bind

BRANCHED_FROM = "_branched_from"
DELEGATE_FROM = "_delegate_from"


def has_marker(db: Bind, alias: str, key: str) -> str:
    """SQL true when row ``alias`` of ``sessions`` carries marker ``key`` (a literal
    identifier, never user input)."""
    column = f"{alias}.model_config"
    if backend_for(db).name == "postgresql":
        # Whitespace as JSON allows it, then anything but the start of "null".
        # strpos first (a plain substring search, several times cheaper than the regular
        # expression): most rows never reach the expression. ELSE false, not NULL, so
        # that NOT of the test is true for a NULL column.
        return (
            f"(CASE WHEN strpos({column}, '\"{key}\"') > 0 "
            f"THEN {column} ~ '\"{key}\"\\s*:\\s*[^\\sn]' ELSE false END)"
        )
    # CASE fixes the order: json_extract never sees text json_valid rejected, and rows
    # that do not mention the key are never parsed at all. The test is never NULL.
    return (
        f"(CASE WHEN instr({column}, '\"{key}\"') > 0 AND json_valid({column}) "
        f"THEN json_extract({column}, '$.{key}') END IS NOT NULL)"
    )


def is_branch(db: Bind, alias: str) -> str:
    """SQL true when ``alias`` is a ``/branch`` child: the marker, or (sessions from before
    the marker) a parent that ended ``'branched'`` no later than the child started."""
    return (
        f"({has_marker(db, alias, BRANCHED_FROM)} OR EXISTS ("
        f"SELECT 1 FROM sessions bp WHERE bp.id = {alias}.parent_session_id "
        f"AND bp.end_reason = 'branched' AND {alias}.started_at >= bp.ended_at))"
    )


def listable(db: Bind, alias: str = "s") -> str:
    """SQL true for the sessions a picker shows: roots and branches, never a delegate
    (even a root one: upstream tags orphaned sub-agent runs that way)."""
    return (
        f"(({alias}.parent_session_id IS NULL OR {is_branch(db, alias)}) "
        f"AND NOT {has_marker(db, alias, DELEGATE_FROM)})"
    )


def continues_chain(db: Bind, alias: str) -> str:
    """SQL true when child row ``alias`` may continue its compression-ended parent's
    conversation: not a branch, not a delegate, not a tool run (no timing test: a racing
    continuation can be written before its parent's ``ended_at``)."""
    return (
        f"(NOT {has_marker(db, alias, BRANCHED_FROM)} AND NOT {has_marker(db, alias, DELEGATE_FROM)} "
        f"AND COALESCE({alias}.source, '') <> 'tool')"
    )
