"""Running a planned search and shaping the hits, whatever the backend.

:func:`find_hits` hands the plan to the search module of the store's backend
(:mod:`.sqlite` for FTS5, :mod:`.postgres` for tsvector/pg_trgm, see
:meth:`hermes_store.backends.Backend.search_module`); both return the same result shape. Every hit then
carries the message before and after it in the same session (``context``).
"""

from __future__ import annotations

from typing import Any

from hermes_store.backends import backend_for
from hermes_store.codec import content_text_for_context, decode_content
from hermes_store.execution import Bind, fetch_tuples
from hermes_store.search.filters import SearchFilters
from hermes_store.search.plan import SearchPlan

__all__ = ["CONTEXT_CHARS", "SearchFilters", "attach_context", "find_hits"]

CONTEXT_CHARS = 200


def find_hits(
    db: Bind, plan: SearchPlan, filters: SearchFilters, limit: int, offset: int
) -> list[dict[str, Any]]:
    """The matching messages (without context) for ``plan``, in the session's dialect."""
    if plan.kind == "empty":
        return []
    hits: list[dict[str, Any]] = backend_for(db).search_module().find_hits(db, plan, filters, limit, offset)
    return hits


_NEIGHBOURS = """
    SELECT h.id,
           (SELECT MAX(p.id) FROM messages p WHERE p.session_id = h.session_id AND p.id < h.id),
           (SELECT MIN(n.id) FROM messages n WHERE n.session_id = h.session_id AND n.id > h.id)
    FROM messages h WHERE h.id IN :hit_ids
"""
_CONTEXT_ROWS = "SELECT id, role, content FROM messages WHERE id IN :ids"


def attach_context(db: Bind, hits: list[dict[str, Any]]) -> None:
    """Give every hit its ``context``: the previous message, the hit and the next one of
    the same session, each ``{"role", "content"}`` with content cut to 200 characters.

    Two queries for the whole page of hits, not one per hit.
    """
    if not hits:
        return
    neighbours = fetch_tuples(db, _NEIGHBOURS, {"hit_ids": [hit["id"] for hit in hits]})
    wanted = {row[0]: [i for i in row if i is not None] for row in neighbours}
    ids = sorted({i for group in wanted.values() for i in group})
    rows = fetch_tuples(db, _CONTEXT_ROWS, {"ids": ids}, content_keys=("content",))
    entries = {
        row[0]: {
            "role": row[1],
            "content": content_text_for_context(decode_content(row[2]))[:CONTEXT_CHARS],
        }
        for row in rows
    }
    for hit in hits:
        hit["context"] = [dict(entries[i]) for i in sorted(wanted.get(hit["id"], [])) if i in entries]
