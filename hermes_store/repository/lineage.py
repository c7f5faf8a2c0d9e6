"""Session lineage through ``parent_session_id``: ancestors, descendants, compression tips.

Three kinds of child exist: a *compression continuation* (parent ended with
``'compression'``, child started at or after the parent ended), a *branch* (parent ended
with ``'branched'``, same timing) and a *delegate* (started while the parent was live).
The walks are recursive CTEs written in SQL both SQLite and PostgreSQL run, bounded in
depth so a corrupt cycle cannot loop forever.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hermes_store.db.backends import backend_for
from hermes_store.db.execution import Bind, fetch_tuples

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

# One step = the latest-started continuation of a session that ended by compression.
_COMPRESSION_TIP = """
    WITH RECURSIVE chain(id, depth) AS (
        SELECT id, 0 FROM sessions WHERE id = :session_id
        UNION ALL
        SELECT (
            SELECT c.id FROM sessions c JOIN sessions p ON p.id = c.parent_session_id
            WHERE c.parent_session_id = chain.id
              AND p.end_reason = 'compression'
              AND c.started_at >= p.ended_at
            ORDER BY c.started_at DESC, c.id DESC
            LIMIT 1
        ), depth + 1
        FROM chain
        WHERE chain.id IS NOT NULL AND depth < :max_depth
    )
    SELECT id FROM chain WHERE id IS NOT NULL ORDER BY depth DESC LIMIT 1
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


def compression_tip(db: Bind, session_id: str) -> str:
    """The last continuation reached by following compression splits (or the input)."""
    rows = fetch_tuples(db, _COMPRESSION_TIP, {"session_id": session_id, "max_depth": MAX_DEPTH})
    return str(rows[0][0]) if rows else session_id


# The same walk for many roots at once: every step of every chain, deepest last.
_COMPRESSION_TIPS = """
    WITH RECURSIVE chain(root_id, id, depth) AS (
        SELECT id, id, 0 FROM sessions WHERE {root_ids}
        UNION ALL
        SELECT chain.root_id, (
            SELECT c.id FROM sessions c JOIN sessions p ON p.id = c.parent_session_id
            WHERE c.parent_session_id = chain.id
              AND p.end_reason = 'compression'
              AND c.started_at >= p.ended_at
            ORDER BY c.started_at DESC, c.id DESC
            LIMIT 1
        ), depth + 1
        FROM chain
        WHERE chain.id IS NOT NULL AND depth < :max_depth
    )
    SELECT root_id, id FROM chain WHERE id IS NOT NULL ORDER BY root_id, depth
    """


def compression_tips(db: Bind, root_ids: Sequence[str]) -> dict[str, str]:
    """:func:`compression_tip` of each of ``root_ids`` (unknown ids are left out), in one query."""
    if not root_ids:
        return {}
    tips: dict[str, str] = {}
    backend = backend_for(db)
    sql = _COMPRESSION_TIPS.format(root_ids=backend.in_list("id", "root_ids"))
    params = {"root_ids": backend.list_value(root_ids), "max_depth": MAX_DEPTH}
    for root_id, session_id in fetch_tuples(db, sql, params):
        tips[str(root_id)] = str(session_id)  # ordered by depth: the last one is the tip
    return tips


_LATEST_CHILD = (
    "SELECT id FROM sessions WHERE parent_session_id = :parent ORDER BY started_at DESC, id DESC LIMIT 1"
)
_HAS_MESSAGES = "SELECT 1 FROM messages WHERE session_id = :session_id LIMIT 1"


def resume_target(db: Bind, session_id: str) -> str:
    """The session to resume: itself if it has messages, else its first descendant that does.

    Walks down the latest-started child of any kind, at most 32 levels, never revisiting
    a session; returns the input when nothing below has messages.
    """
    if fetch_tuples(db, _HAS_MESSAGES, {"session_id": session_id}):
        return session_id
    visited = {session_id}
    current = session_id
    for _ in range(MAX_RESUME_DEPTH):
        children = fetch_tuples(db, _LATEST_CHILD, {"parent": current})
        child = children[0][0] if children else None
        if child is None or child in visited:
            break
        if fetch_tuples(db, _HAS_MESSAGES, {"session_id": child}):
            return str(child)
        visited.add(child)
        current = child
    return session_id
