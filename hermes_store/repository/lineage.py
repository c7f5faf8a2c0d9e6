"""Session lineage through ``parent_session_id``: ancestors, descendants, compression tips.

Three kinds of child exist: a *branch* (a ``_branched_from`` marker in its
``model_config``, or, from before the marker, a parent that ended ``'branched'`` before the
child started), a *delegate* (a ``_delegate_from`` marker) and a *compression
continuation* (any other child of a parent that ended with ``'compression'``, except tool
runs). See :mod:`hermes_store.repository.markers`. Every walk is bounded in depth or
stops at a session it has seen, so a corrupt cycle cannot loop forever.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hermes_store.db.backends import backend_for
from hermes_store.db.execution import Bind, fetch_tuples
from hermes_store.repository import markers

MAX_DEPTH = 100
MAX_RESUME_DEPTH = 32


@dataclass(frozen=True)
class LineageNode:
    """One session in a lineage walk."""

    id: str
    parent_session_id: str | None
    title: str | None
    started_at: float
    ended_at: float | None
    end_reason: str | None
    depth: int


_ANCESTORS = """
    WITH RECURSIVE lineage(id, depth) AS (
        SELECT id, 0 FROM sessions WHERE id = :session_id
        UNION
        SELECT s.parent_session_id, l.depth + 1
        FROM lineage l JOIN sessions s ON s.id = l.id
        WHERE s.parent_session_id IS NOT NULL AND l.depth < :max_depth
    )
    SELECT s.id, s.parent_session_id, s.title, s.started_at, s.ended_at, s.end_reason,
           MIN(l.depth) AS depth
    FROM lineage l JOIN sessions s ON s.id = l.id
    GROUP BY s.id, s.parent_session_id, s.title, s.started_at, s.ended_at, s.end_reason
    ORDER BY depth DESC
    """

_DESCENDANTS = """
    WITH RECURSIVE descendants(id, depth) AS (
        SELECT id, 0 FROM sessions WHERE id = :session_id
        UNION
        SELECT s.id, d.depth + 1
        FROM descendants d JOIN sessions s ON s.parent_session_id = d.id
        WHERE d.depth < :max_depth
    )
    SELECT s.id, s.parent_session_id, s.title, s.started_at, s.ended_at, s.end_reason,
           MIN(d.depth) AS depth
    FROM descendants d JOIN sessions s ON s.id = d.id
    GROUP BY s.id, s.parent_session_id, s.title, s.started_at, s.ended_at, s.end_reason
    ORDER BY depth, s.started_at, s.id
    """


def ancestors(db: Bind, session_id: str) -> list[LineageNode]:
    """The session and its ancestors, root first, session last (empty if unknown)."""
    rows = fetch_tuples(db, _ANCESTORS, {"session_id": session_id, "max_depth": MAX_DEPTH})
    return [LineageNode(*row) for row in rows]


def descendants(db: Bind, session_id: str) -> list[LineageNode]:
    """The session and every descendant, breadth first (empty if unknown)."""
    rows = fetch_tuples(db, _DESCENDANTS, {"session_id": session_id, "max_depth": MAX_DEPTH})
    return [LineageNode(*row) for row in rows]


def chain_root_to_session(db: Bind, session_id: str) -> list[str]:
    """Ids from the root ancestor down to ``session_id``; ``[session_id]`` if unknown."""
    ids = [node.id for node in ancestors(db, session_id)]
    return ids or [session_id]


# --- compression continuations --------------------------------------------------------

# Of each listed session that ended by compression, its best continuation: first one that
# itself ended by compression (the chain goes on), then a live one, then any other; among
# those the most recently active, then the latest started, then the greatest id.
_NEXT_CONTINUATIONS = """
    SELECT parent_id, id FROM (
        SELECT c.parent_session_id AS parent_id, c.id,
            ROW_NUMBER() OVER (
                PARTITION BY c.parent_session_id
                ORDER BY
                    CASE WHEN c.end_reason = 'compression' THEN 0
                         WHEN c.ended_at IS NULL THEN 1
                         ELSE 2 END,
                    COALESCE(
                        (SELECT MAX(m.timestamp) FROM messages m WHERE m.session_id = c.id),
                        c.started_at
                    ) DESC,
                    c.started_at DESC,
                    c.id DESC
            ) AS rank
        FROM sessions p JOIN sessions c ON c.parent_session_id = p.id
        WHERE {parent_ids} AND p.end_reason = 'compression' AND {continues}
    ) ranked
    WHERE rank = 1
    """


def _next_continuations(db: Bind, parent_ids: Sequence[str]) -> dict[str, str]:
    """The best continuation of each of ``parent_ids`` that has one, by parent id."""
    backend = backend_for(db)
    sql = _NEXT_CONTINUATIONS.format(
        parent_ids=backend.in_list("p.id", "parent_ids"), continues=markers.continues_chain(db, "c")
    )
    rows = fetch_tuples(db, sql, {"parent_ids": backend.list_value(sorted(set(parent_ids)))})
    return {str(parent): str(child) for parent, child in rows}


def compression_tips(db: Bind, session_ids: Sequence[str]) -> dict[str, str]:
    """The compression tip of each of ``session_ids``: the session reached by following
    the best continuation (see :func:`_next_continuations`) while there is one, at most
    100 steps, stopping before a session the walk has already visited. A session without
    a continuation (or unknown) is its own tip.

    All chains advance together, one query per step, so a listing page costs as many
    queries as its longest chain has links.
    """
    tips = {session_id: session_id for session_id in session_ids}
    visited = {session_id: {session_id} for session_id in session_ids}
    walking = set(session_ids)
    for _ in range(MAX_DEPTH):
        if not walking:
            break
        following = _next_continuations(db, [tips[session_id] for session_id in walking])
        for session_id in list(walking):
            child = following.get(tips[session_id])
            if child is None or child in visited[session_id]:
                walking.discard(session_id)
                continue
            visited[session_id].add(child)
            tips[session_id] = child
    return tips


def compression_tip(db: Bind, session_id: str) -> str:
    """The latest continuation reached through compression splits, or the input."""
    return compression_tips(db, [session_id])[session_id]


_COMPRESSION_ANCESTORS = """
    WITH RECURSIVE up(id) AS (
        SELECT :session_id
        UNION
        SELECT p.id FROM up
        JOIN sessions c ON c.id = up.id
        JOIN sessions p ON p.id = c.parent_session_id
        WHERE p.end_reason = 'compression'
    )
    SELECT id FROM up WHERE id <> :session_id
    """


def compression_ancestors(db: Bind, session_id: str) -> set[str]:
    """The sessions ``session_id`` continues: its parent if that ended by compression, that
    one's parent on the same terms, and so on (``UNION`` stops a cycle)."""
    return {str(row[0]) for row in fetch_tuples(db, _COMPRESSION_ANCESTORS, {"session_id": session_id})}


# --- resume ---------------------------------------------------------------------------

# Whether a session has messages, and its latest-started child that is not a branch, a
# delegate or a tool run (compression or not: resume follows any such child).
_RESUME_STEP = """
    SELECT
        EXISTS (SELECT 1 FROM messages WHERE session_id = :session_id) AS has_messages,
        (SELECT c.id FROM sessions c
         WHERE c.parent_session_id = :session_id AND {continues}
         ORDER BY c.started_at DESC, c.id DESC LIMIT 1) AS child_id
    """


def resume_target(db: Bind, session_id: str) -> str:
    """The session to resume ``session_id`` in.

    From the compression tip it walks down the latest-started child (branches, delegates
    and tool runs left out), at most 32 sessions, never revisiting one, and returns the
    deepest session of the walk that holds messages; the tip when none does. A session
    with messages of its own still resolves to a descendant that has some.
    """
    start = compression_tip(db, session_id)
    sql = _RESUME_STEP.format(continues=markers.continues_chain(db, "c"))
    visited = {start}
    current, deepest_with_messages = start, None
    for _ in range(MAX_RESUME_DEPTH):
        ((has_messages, child),) = fetch_tuples(db, sql, {"session_id": current})
        if has_messages:
            deepest_with_messages = current
        if child is None or child in visited:
            break
        visited.add(child)
        current = str(child)
    return deepest_with_messages if deepest_with_messages is not None else start
