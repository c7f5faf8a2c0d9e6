"""Delegate sub-agent sessions: which rows go when the session that spawned them goes.

A sub-agent run is tagged at creation with ``"_delegate_from": <parent id>`` in its
``model_config`` JSON. Deleting a session deletes its delegates with it (and theirs,
through chains of markers), while branches, compression continuations and untagged
children are only detached. ``model_config`` is free text, written by several programs:
a value that is not JSON, or not a JSON object, simply carries no marker.

Functions take the caller's connection and never commit.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from sqlalchemy import exc as sa_exc

from hermes_store.db.backends import backend_for
from hermes_store.db.execution import Bind, connection_of, fetch_tuples

DELEGATE_MARKER = "_delegate_from"
# LIKE pattern (backslash escapes) that every model_config holding the marker matches:
# it keeps the JSON parsing to the few rows that can carry one.
_MARKER_LIKE = "%\\_delegate\\_from%"
# PostgreSQL's SQLSTATE for text that does not parse as the type it is cast to.
_INVALID_TEXT_REPRESENTATION = "22P02"

# The marker's value as text, NULL where there is none. SQLite parses only valid JSON
# (json_extract raises on anything else); PostgreSQL has no validity test before 16, so
# its cast may fail, and then the caller falls back to parsing in Python.
_SQLITE_MARKER = "CASE WHEN json_valid(model_config) THEN json_extract(model_config, '$._delegate_from') END"
# The CASE makes sure the cast only ever sees rows that mention the marker.
_POSTGRES_MARKER = (
    "CASE WHEN model_config LIKE :marker_like ESCAPE '\\'"
    " THEN CAST(model_config AS jsonb) ->> '_delegate_from' END"
)

_TAGGED_CHILDREN = (
    "SELECT id FROM ("
    " SELECT id, parent_session_id, {marker} AS marker FROM sessions"
    " WHERE model_config LIKE :marker_like ESCAPE '\\'"
    ") AS tagged WHERE marker IS NOT NULL AND ({marker_in} OR {parent_in})"
)
_ALL_TAGGED = (
    "SELECT id, parent_session_id, model_config FROM sessions"
    " WHERE model_config LIKE :marker_like ESCAPE '\\'"
)


def marker_of(model_config: Any) -> str | None:
    """The ``_delegate_from`` value of a ``model_config`` text as text, or ``None``.

    Text that is not a JSON object, and a JSON ``null`` marker, carry no marker; a
    non-string value is given as its JSON text (as PostgreSQL's ``->>`` gives it).
    """
    if not isinstance(model_config, str | bytes):
        return None
    try:
        parsed = json.loads(model_config)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    value = parsed.get(DELEGATE_MARKER)
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)


class _TaggedRows:
    """Finds, one step of the walk at a time, the tagged sessions a set of ids spawned.

    Runs one statement per step; if PostgreSQL cannot parse some row's ``model_config``,
    every tagged row is read once and the rest of the walk is done in Python.
    """

    def __init__(self, db: Bind) -> None:
        self.db = db
        self.backend = backend_for(db)
        self.parsed: list[tuple[str, str | None, str | None]] | None = None

    def children_of(self, frontier: Sequence[str]) -> list[str]:
        """Ids of rows whose marker names one of ``frontier``, or that are a child of one
        of ``frontier`` and carry any marker."""
        if self.parsed is None:
            if self.backend.name == "sqlite":
                return self._query(frontier, _SQLITE_MARKER)
            try:
                # A savepoint, so that a failed cast leaves the write transaction usable.
                with connection_of(self.db).begin_nested():
                    return self._query(frontier, _POSTGRES_MARKER)
            except sa_exc.DBAPIError as exc:
                if getattr(exc.orig, "sqlstate", None) != _INVALID_TEXT_REPRESENTATION:
                    raise
            self.parsed = [
                (str(row[0]), row[1], marker_of(row[2]))
                for row in fetch_tuples(self.db, _ALL_TAGGED, {"marker_like": _MARKER_LIKE})
            ]
        doomed = set(frontier)
        return [
            session_id
            for session_id, parent, marker in self.parsed
            if marker is not None and (marker in doomed or parent in doomed)
        ]

    def _query(self, frontier: Sequence[str], marker: str) -> list[str]:
        sql = _TAGGED_CHILDREN.format(
            marker=marker,
            marker_in=self.backend.in_list("marker", "frontier"),
            parent_in=self.backend.in_list("parent_session_id", "frontier"),
        )
        params = {"marker_like": _MARKER_LIKE, "frontier": self.backend.list_value(frontier)}
        return [str(row[0]) for row in fetch_tuples(self.db, sql, params)]


def delegate_children(db: Bind, parent_ids: Iterable[str], keep: Collection[str] = ()) -> list[str]:
    """Every delegate sub-agent session that goes with ``parent_ids``, recursively.

    A row belongs to a doomed session when its marker names it, or when it is that
    session's child and carries any marker; the walk goes on from each row found. The
    parents themselves, and the ids in ``keep`` (sessions the caller deletes on their
    own), are never returned, even when markers form a cycle back to them.
    """
    seeds = sorted({session_id for session_id in parent_ids if session_id})
    seen = set(seeds) | set(keep)
    tagged = _TaggedRows(db)
    found: list[str] = []
    frontier = seeds
    while frontier:
        fresh = [session_id for session_id in tagged.children_of(frontier) if session_id not in seen]
        fresh = sorted(set(fresh))
        seen.update(fresh)
        found.extend(fresh)
        frontier = fresh
    return found
