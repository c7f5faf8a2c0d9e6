"""Delegate sub-agent sessions on a plain ``sqlite3`` connection (functions of Hermes' module).

A sub-agent run carries ``"_delegate_from": <parent id>`` in its ``model_config`` JSON.
When sessions are deleted, their delegates go with them, through chains of markers; a
chain that loops back to one of the sessions being deleted must never make it its own
delegate. The store does this on its own connections (:mod:`hermes_store.repository.delegates`);
these two functions do it on a caller's ``sqlite3`` connection, without committing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from hermes_store.repository.delegates import DELEGATE_MARKER, marker_of


def _collect_delegate_child_ids(conn: sqlite3.Connection, parent_ids: Iterable[str]) -> list[str]:
    """Ids of the delegate sessions of ``parent_ids``, recursively: rows whose marker names
    one of them, or that are a child of one and carry any marker. Never one of
    ``parent_ids`` itself; untagged children are not delegates."""
    seeds = {session_id for session_id in parent_ids if session_id}
    # Every tagged row, read once: a LIKE keeps the JSON parsing to rows that can match.
    tagged = [
        (str(row[0]), row[1], marker_of(row[2]))
        for row in conn.execute(
            "SELECT id, parent_session_id, model_config FROM sessions WHERE model_config LIKE ?",
            (f"%{DELEGATE_MARKER}%",),
        )
    ]
    found = set(seeds)  # the parents are seen from the start, so a cycle cannot collect them
    frontier = set(seeds)
    while frontier:
        step = {
            session_id
            for session_id, parent, marker in tagged
            if marker is not None and (marker in frontier or parent in frontier) and session_id not in found
        }
        found |= step
        frontier = step
    return sorted(found - seeds)


def _delete_delegate_children(conn: sqlite3.Connection, parent_ids: Iterable[str]) -> list[str]:
    """Delete the delegates of ``parent_ids`` (see :func:`_collect_delegate_child_ids`) and
    their messages; untagged rows that named one of them as parent are detached. Returns
    the deleted ids."""
    doomed = _collect_delegate_child_ids(conn, parent_ids)
    if doomed:
        marks = ",".join("?" * len(doomed))
        conn.execute(f"DELETE FROM messages WHERE session_id IN ({marks})", doomed)
        conn.execute(
            f"UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id IN ({marks})", doomed
        )
        conn.execute(f"DELETE FROM sessions WHERE id IN ({marks})", doomed)
    return doomed
