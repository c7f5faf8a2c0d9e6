"""Session archiving: the ``sessions.archived`` flag that hides a conversation from lists.

Archiving hides a session; it deletes nothing and keeps every message. (It is unrelated
to the ``active``/``compacted`` flags of messages.)
"""

from __future__ import annotations

from sqlalchemy import text

from hermes_store.db.execution import Bind, run

# The conversation a session belongs to: the sessions it continues after compression
# (up through parents that ended by compression) and those continuing it (down through
# every child of a session that ended by compression, whatever kind of child). UNION
# discards a session already reached, so a cycle ends the walk.
_SET_LINEAGE_ARCHIVED = text(
    """
    WITH RECURSIVE
        up(id) AS (
            SELECT CAST(:session_id AS TEXT)
            UNION
            SELECT p.id FROM up
            JOIN sessions c ON c.id = up.id
            JOIN sessions p ON p.id = c.parent_session_id
            WHERE p.end_reason = 'compression'
        ),
        down(id) AS (
            SELECT CAST(:session_id AS TEXT)
            UNION
            SELECT c.id FROM down
            JOIN sessions p ON p.id = down.id
            JOIN sessions c ON c.parent_session_id = p.id
            WHERE p.end_reason = 'compression'
        )
    UPDATE sessions SET archived = :archived
    WHERE id IN (SELECT id FROM up UNION SELECT id FROM down)
    """
)


def set_archived(db: Bind, session_id: str, archived: bool) -> bool:
    """Archive (or restore) the whole conversation of ``session_id``; ``False`` when there
    is no such session. Setting the value a session already has still counts."""
    result = run(db, _SET_LINEAGE_ARCHIVED, {"session_id": session_id, "archived": 1 if archived else 0})
    changed = result.rowcount
    if changed is None or changed < 0:
        # Python's sqlite3 reports no count for a statement that begins with WITH;
        # SQLite itself still knows how many rows it changed.
        changed = run(db, text("SELECT changes()")).scalar_one()
    return int(changed) > 0
