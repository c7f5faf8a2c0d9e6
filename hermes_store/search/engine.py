"""Running a planned search and shaping the hits, whatever the backend.

:func:`find_hits` hands the plan to the search module of the store's backend
(:mod:`.sqlite` for FTS5, :mod:`.postgres` for tsvector/pg_trgm, see
:func:`_implementation`); both return the same result shape. Every hit then
carries the message before and after it in the same session (``context``).
"""

from __future__ import annotations

from dataclasses import replace
from types import ModuleType
from typing import Any

from hermes_store.db.backends import backend_for
from hermes_store.db.execution import Bind, fetch_tuples
from hermes_store.domain.codec import content_text_for_context, decode_content
from hermes_store.search.filters import SearchFilters
from hermes_store.search.order import SearchOrder
from hermes_store.search.plan import SearchPlan

__all__ = ["CONTEXT_CHARS", "SearchFilters", "attach_context", "find_hits", "search"]

CONTEXT_CHARS = 200


def search(
    db: Bind,
    plan: SearchPlan,
    filters: SearchFilters,
    limit: int,
    offset: int,
    order: SearchOrder = "rank",
) -> list[dict[str, Any]]:
    """``search_messages``: the hits of ``plan`` in ``order``, each with its ``context``."""
    hits = find_hits(db, plan, replace(filters, backend=backend_for(db)), limit, offset, order)
    attach_context(db, hits)
    return hits


def find_hits(
    db: Bind,
    plan: SearchPlan,
    filters: SearchFilters,
    limit: int,
    offset: int,
    order: SearchOrder = "rank",
) -> list[dict[str, Any]]:
    """The matching messages (without context) for ``plan`` in ``order``, in the session's
    dialect."""
    if plan.kind == "empty":
        return []
    module = _implementation(backend_for(db).name)
    hits: list[dict[str, Any]] = module.find_hits(db, plan, filters, limit, offset, order)
    return hits


def _implementation(backend: str) -> ModuleType:
    """The module implementing ``find_hits`` on ``backend``, imported on first use (a
    SQLite store never imports the PostgreSQL statements)."""
    if backend == "postgresql":
        from hermes_store.search import postgres

        return postgres
    from hermes_store.search import sqlite

    return sqlite


# The hit, the message before it and the message after it in the same session, for a
# whole page of hits: each message is found by id (the primary key).
_CONTEXT = """
    SELECT h.id AS hit_id, c.id, c.role, c.content
    FROM messages h JOIN messages c ON c.id IN (
        h.id,
        (SELECT MAX(p.id) FROM messages p WHERE p.session_id = h.session_id AND p.id < h.id),
        (SELECT MIN(n.id) FROM messages n WHERE n.session_id = h.session_id AND n.id > h.id)
    )
    WHERE {hit_ids}
"""


def attach_context(db: Bind, hits: list[dict[str, Any]]) -> None:
    """Give every hit its ``context``: the previous message, the hit and the next one of
    the same session, each ``{"role", "content"}`` with content cut to 200 characters.

    One query for the whole page of hits, not one per hit.
    """
    if not hits:
        return
    backend = backend_for(db)
    sql = _CONTEXT.format(hit_ids=backend.in_list("h.id", "hit_ids"))
    params = {"hit_ids": backend.list_value([hit["id"] for hit in hits])}
    rows = fetch_tuples(db, sql, params, content_keys=("content",))
    context: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for hit_id, message_id, role, content in rows:
        entry = {"role": role, "content": content_text_for_context(decode_content(content))[:CONTEXT_CHARS]}
        context.setdefault(hit_id, []).append((message_id, entry))
    for hit in hits:
        hit["context"] = [entry for _, entry in sorted(context.get(hit["id"], []), key=lambda item: item[0])]
