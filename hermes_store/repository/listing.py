"""Read-side session listings: recent sessions with previews, last activity, analytics.

The listing SQL is hand-written (``text()``) because its shape — correlated preview and
last-activity subqueries, and a recursive CTE over compression continuations — reads
better as SQL than as a builder expression. It runs unchanged on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hermes_store.db.backends import backend_for
from hermes_store.db.execution import Bind, fetch_dicts
from hermes_store.domain.codec import CONTENT_JSON_PREFIX, preview_text
from hermes_store.repository.lineage import compression_tips
from hermes_store.schema.models import Session

_SESSION_COLUMN_NAMES = tuple(column.name for column in Session.__table__.columns)
_S_COLUMNS = ", ".join(f"s.{name}" for name in _SESSION_COLUMN_NAMES)

# The first user message's text, newlines flattened, first 63 characters. Content
# stored behind the JSON sentinel (multimodal) is returned whole so that Python can
# pull its text parts out: SQLite's substr() would stop at the sentinel's NUL byte.
_PREVIEW = """(
    SELECT CASE
        WHEN {starts_with_sentinel} THEN m.content
        ELSE substr(replace(replace(m.content, :lf, ' '), :cr, ' '), 1, 63)
    END
    FROM messages m
    WHERE m.session_id = s.id AND m.role = 'user' AND m.content IS NOT NULL
    ORDER BY m.timestamp, m.id
    LIMIT 1
)"""
_LAST_ACTIVE = (
    "COALESCE((SELECT MAX(m2.timestamp) FROM messages m2 WHERE m2.session_id = s.id), s.started_at)"
)
_VISIBLE_CHILD = """(
    s.parent_session_id IS NULL
    OR EXISTS (
        SELECT 1 FROM sessions p
        WHERE p.id = s.parent_session_id
          AND p.end_reason = 'branched'
          AND s.started_at >= p.ended_at
    )
)"""


def _preview_sql(db: Bind) -> tuple[str, dict[str, Any]]:
    starts_with_sentinel, params = backend_for(db).preview_starts_with_sentinel()
    return _PREVIEW.format(starts_with_sentinel=starts_with_sentinel), {**params, "lf": "\n", "cr": "\r"}


@dataclass(frozen=True)
class ListingFilter:
    """Which sessions a listing shows."""

    source: str | None = None
    exclude_sources: Sequence[str] | None = None
    include_children: bool = False

    def where(self, source: str = "s.source") -> tuple[str, dict[str, Any]]:
        """The SQL condition on alias ``s`` and its parameters; ``source`` is the SQL for
        the source column (a backend may add a planner hint, see
        :attr:`hermes_store.db.backends.Backend.listing_source_column`)."""
        clauses = ["1 = 1"]
        params: dict[str, Any] = {}
        if not self.include_children:
            clauses.append(_VISIBLE_CHILD)
        if self.source:
            clauses.append(f"{source} = :source")
            params["source"] = self.source
        if self.exclude_sources:
            clauses.append(f"{source} NOT IN :exclude_sources")
            params["exclude_sources"] = list(self.exclude_sources)
        return " AND ".join(clauses), params


def rich_rows(db: Bind, listing: ListingFilter, limit: int, offset: int) -> list[dict[str, Any]]:
    """Sessions with ``preview`` (raw, see :func:`finish_preview`) and ``last_active``,
    newest first."""
    condition, params = listing.where(backend_for(db).listing_source_column)
    preview, preview_params = _preview_sql(db)
    if offset:
        # The page's sessions first, from the started_at index; the preview and
        # last-activity subqueries then run for the page only, not for the skipped rows.
        sql = (
            f"SELECT {_S_COLUMNS}, {preview} AS preview, {_LAST_ACTIVE} AS last_active FROM ("
            f"SELECT {_S_COLUMNS} FROM sessions s WHERE {condition} "
            "ORDER BY s.started_at DESC LIMIT :limit OFFSET :offset"
            ") s ORDER BY s.started_at DESC"
        )
    else:
        sql = (
            f"SELECT {_S_COLUMNS}, {preview} AS preview, {_LAST_ACTIVE} AS last_active "
            f"FROM sessions s WHERE {condition} "
            "ORDER BY s.started_at DESC LIMIT :limit OFFSET :offset"
        )
    params |= {**preview_params, "limit": limit, "offset": offset}
    return fetch_dicts(db, sql, params, content_keys=("preview",))


def rich_rows_by_last_active(
    db: Bind, listing: ListingFilter, limit: int, offset: int
) -> list[dict[str, Any]]:
    """Like :func:`rich_rows`, ordered by the latest activity anywhere in each row's
    compression chain (so a conversation continued after compression sorts by its tip)."""
    condition, params = listing.where(backend_for(db).listing_source_column)
    preview, preview_params = _preview_sql(db)
    sql = f"""
    WITH RECURSIVE roots AS (
        SELECT s.id FROM sessions s WHERE {condition}
    ),
    chain(root_id, id, depth) AS (
        SELECT id, id, 0 FROM roots
        UNION ALL
        SELECT chain.root_id, c.id, chain.depth + 1
        FROM chain
        JOIN sessions p ON p.id = chain.id
        JOIN sessions c ON c.parent_session_id = p.id
        WHERE p.end_reason = 'compression' AND c.started_at >= p.ended_at AND chain.depth < 100
    ),
    effective AS (
        SELECT chain.root_id, MAX(COALESCE(
            (SELECT MAX(m.timestamp) FROM messages m WHERE m.session_id = chain.id),
            (SELECT cs.started_at FROM sessions cs WHERE cs.id = chain.id)
        )) AS active_at
        FROM chain GROUP BY chain.root_id
    )
    SELECT {_S_COLUMNS}, {preview} AS preview, {_LAST_ACTIVE} AS last_active
    FROM sessions s JOIN effective e ON e.root_id = s.id
    ORDER BY e.active_at DESC, s.started_at DESC, s.id DESC
    LIMIT :limit OFFSET :offset
    """
    params |= {**preview_params, "limit": limit, "offset": offset}
    return fetch_dicts(db, sql, params, content_keys=("preview",))


def rich_rows_for(db: Bind, session_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Sessions ``session_ids`` with their raw preview and last_active, by id."""
    preview, preview_params = _preview_sql(db)
    sql = (
        f"SELECT {_S_COLUMNS}, {preview} AS preview, {_LAST_ACTIVE} AS last_active "
        f"FROM sessions s WHERE {backend_for(db).in_list('s.id', 'session_ids')}"
    )
    rows = fetch_dicts(
        db,
        sql,
        {**preview_params, "session_ids": backend_for(db).list_value(session_ids)},
        content_keys=("preview",),
    )
    return {row["id"]: row for row in rows}


def by_last_active(db: Bind, source: str | None, limit: int, offset: int) -> list[dict[str, Any]]:
    """Every session column plus ``last_active``, most recently active first."""
    where = "WHERE s.source = :source" if source else ""
    sql = (
        f"SELECT {_S_COLUMNS}, {_LAST_ACTIVE} AS last_active FROM sessions s {where} "
        "ORDER BY last_active DESC, s.started_at DESC, s.id DESC LIMIT :limit OFFSET :offset"
    )
    params: dict[str, Any] = {"limit": limit, "offset": offset}
    if source:
        params["source"] = source
    return fetch_dicts(db, sql, params)


# --- the assembled listing ------------------------------------------------------------

PREVIEW_CHARS = 60
# The columns a compression root shows from its latest continuation.
_PROJECTED_KEYS = (
    "id",
    "ended_at",
    "end_reason",
    "message_count",
    "tool_call_count",
    "title",
    "last_active",
    "preview",
    "model",
    "system_prompt",
)


def rich_listing(
    db: Bind,
    listing: ListingFilter,
    limit: int,
    offset: int,
    *,
    order_by_last_active: bool = False,
    project_compression_tips: bool = True,
) -> list[dict[str, Any]]:
    """``list_sessions_rich``: rows with a finished ``preview`` and ``last_active``.

    With ``project_compression_tips`` a session split by compression shows its latest
    continuation's details (and ``_lineage_root_id``); the tips and their rows take two
    queries for the whole page.
    """
    fetch = rich_rows_by_last_active if order_by_last_active else rich_rows
    rows = fetch(db, listing, limit, offset)
    for row in rows:
        row["preview"] = finish_preview(row["preview"])
    if project_compression_tips:
        _project_tips(db, [row for row in rows if row.get("end_reason") == "compression"])
    return rows


def finish_preview(raw: Any) -> str:
    """The preview text of a raw preview column: text parts of JSON content, flattened,
    stripped, at most 60 characters plus ``"..."``."""
    text = preview_text(raw)
    if isinstance(raw, str) and raw.startswith(CONTENT_JSON_PREFIX):
        text = text.replace("\n", " ").replace("\r", " ")[:63]
    text = text.strip()
    return text[:PREVIEW_CHARS] + "..." if len(text) > PREVIEW_CHARS else text


def _project_tips(db: Bind, roots: list[dict[str, Any]]) -> None:
    """Show each compression root with its tip's details: two queries for the whole page."""
    if not roots:
        return
    tips = {
        root: tip for root, tip in compression_tips(db, [row["id"] for row in roots]).items() if tip != root
    }
    tip_rows = rich_rows_for(db, sorted(set(tips.values()))) if tips else {}
    for row in roots:
        tip_row = tip_rows.get(tips.get(row["id"], ""))
        if tip_row is None:
            continue
        projected = {**tip_row, "preview": finish_preview(tip_row["preview"])}
        root_id = row["id"]
        for key in _PROJECTED_KEYS:
            row[key] = projected[key]
        row["_lineage_root_id"] = root_id
