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

# Tagged rows whose marker names another session than their parent: the only ones a walk
# down parent links (which the parent index serves) would miss. One scan per walk.
_DETACHED_TAGGED = (
    "SELECT id, marker FROM ("
    " SELECT id, parent_session_id, {marker} AS marker FROM sessions"
    " WHERE model_config LIKE :marker_like ESCAPE '\\'"
    ") AS tagged WHERE marker IS NOT NULL AND (parent_session_id IS NULL OR marker <> parent_session_id)"
)
_ALL_TAGGED = (
    "SELECT id, parent_session_id, model_config FROM sessions"
    " WHERE model_config LIKE :marker_like ESCAPE '\\'"
)
_CHILDREN = "SELECT id, model_config FROM sessions WHERE {parent_in}"


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


def _as_text(marker: Any) -> str:
    """A marker value SQLite's ``json_extract`` gave (a number stays a number) as text."""
    return marker if isinstance(marker, str) else json.dumps(marker)


class _TaggedRows:
    """Finds, one step of the walk at a time, the tagged sessions a set of ids spawned.

    Each step looks up the children of the step's ids through the parent index and reads
    their markers in Python; the rows tagged with a session other than their parent are
    read once, up front, in the one full scan a walk needs.
    """

    def __init__(self, db: Bind) -> None:
        self.db = db
        self.backend = backend_for(db)
        self.detached = self._detached_rows()

    def _detached_rows(self) -> list[tuple[str, str]]:
        params = {"marker_like": _MARKER_LIKE}
        if self.backend.name == "sqlite":
            rows = fetch_tuples(self.db, _DETACHED_TAGGED.format(marker=_SQLITE_MARKER), params)
            return [(str(session_id), _as_text(marker)) for session_id, marker in rows]
        try:
            # A savepoint, so that a failed cast leaves the write transaction usable.
            with connection_of(self.db).begin_nested():
                rows = fetch_tuples(self.db, _DETACHED_TAGGED.format(marker=_POSTGRES_MARKER), params)
            return [(str(session_id), str(marker)) for session_id, marker in rows]
        except sa_exc.DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) != _INVALID_TEXT_REPRESENTATION:
                raise
        # Some row's text does not parse: read every tagged row and parse it here.
        detached = []
        for session_id, parent, model_config in fetch_tuples(self.db, _ALL_TAGGED, params):
            marker = marker_of(model_config)
            if marker is not None and marker != parent:
                detached.append((str(session_id), marker))
        return detached

    def children_of(self, frontier: Sequence[str]) -> list[str]:
        """Ids of rows whose marker names one of ``frontier``, or that are a child of one
        of ``frontier`` and carry any marker."""
        sql = _CHILDREN.format(parent_in=self.backend.in_list("parent_session_id", "frontier"))
        children = fetch_tuples(self.db, sql, {"frontier": self.backend.list_value(frontier)})
        found = [
            str(session_id) for session_id, model_config in children if marker_of(model_config) is not None
        ]
        doomed = set(frontier)
        found += [session_id for session_id, marker in self.detached if marker in doomed]
        return found


def delegate_children(db: Bind, parent_ids: Iterable[str], keep: Collection[str] = ()) -> list[str]:
    """Every delegate sub-agent session that goes with ``parent_ids``, recursively.

    A row belongs to a doomed session when its marker names it, or when it is that
    session's child and carries any marker; the walk goes on from each row found. The
    parents themselves, and the ids in ``keep`` (sessions the caller deletes on their
    own), are never returned, even when markers form a cycle back to them.
    """
    seeds = sorted({session_id for session_id in parent_ids if session_id})
    if not seeds:
        return []
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
