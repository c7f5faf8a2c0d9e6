"""Running a planned search and shaping the hits, whatever the backend.

:func:`find_hits` hands the plan to the backend's module (:mod:`.sqlite` for FTS5,
:mod:`.postgres` for tsvector/pg_trgm); both return the same result shape. Every hit then
carries the message before and after it in the same session (``context``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import orm, text

from hermes_store.codec import content_text_for_context, decode_content
from hermes_store.search.plan import SearchPlan
from hermes_store.types import content_from_storage

CONTEXT_CHARS = 200


@dataclass(frozen=True)
class SearchFilters:
    """Restrictions applied before ``LIMIT``/``OFFSET``.

    ``sources=[]`` matches nothing; ``exclude_sources=[]`` excludes nothing; an empty
    ``roles`` applies no role filter (upstream's rules).
    """

    sources: Sequence[str] | None = None
    exclude_sources: Sequence[str] | None = None
    roles: Sequence[str] | None = None

    def sql(self) -> tuple[str, dict[str, Any], list[str]]:
        """SQL conditions (leading ``AND``), their parameters, expanding parameter names."""
        parts: list[str] = []
        params: dict[str, Any] = {}
        expanding: list[str] = []
        if self.sources is not None and not self.sources:
            parts.append("AND 1 = 0")  # an empty include-list matches nothing
        elif self.sources is not None:
            parts.append("AND s.source IN :sources")
            params["sources"] = list(self.sources)
            expanding.append("sources")
        if self.exclude_sources:
            parts.append("AND s.source NOT IN :exclude_sources")
            params["exclude_sources"] = list(self.exclude_sources)
            expanding.append("exclude_sources")
        if self.roles:
            parts.append("AND m.role IN :roles")
            params["roles"] = list(self.roles)
            expanding.append("roles")
        return " ".join(parts), params, expanding


def find_hits(
    db: orm.Session, plan: SearchPlan, filters: SearchFilters, limit: int, offset: int
) -> list[dict[str, Any]]:
    """The matching messages (without context) for ``plan``, in the session's dialect."""
    if plan.kind == "empty":
        return []
    if db.get_bind().dialect.name == "postgresql":
        from hermes_store.search import postgres

        return postgres.find_hits(db, plan, filters, limit, offset)
    from hermes_store.search import sqlite

    return sqlite.find_hits(db, plan, filters, limit, offset)


_CONTEXT = text(
    """
    SELECT role, content FROM messages
    WHERE session_id = :session_id AND id IN (
        (SELECT MAX(id) FROM messages WHERE session_id = :session_id AND id < :id),
        :id,
        (SELECT MIN(id) FROM messages WHERE session_id = :session_id AND id > :id)
    )
    ORDER BY id
    """
)


def context_of(db: orm.Session, session_id: str, message_id: int) -> list[dict[str, str]]:
    """The previous message, the message and the next one of the same session,
    each as ``{"role", "content"}`` with content cut to 200 characters."""
    rows = db.execute(_CONTEXT, {"session_id": session_id, "id": message_id}).all()
    dialect = db.get_bind().dialect.name
    return [
        {
            "role": row.role,
            "content": content_text_for_context(decode_content(content_from_storage(row.content, dialect)))[
                :CONTEXT_CHARS
            ],
        }
        for row in rows
    ]
