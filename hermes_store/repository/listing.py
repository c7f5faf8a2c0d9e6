"""Read-side session listings: recent sessions with previews, last activity, analytics.

The listing SQL is hand-written (``text()``) because its shape — correlated preview and
last-activity subqueries, and a recursive CTE over compression continuations — reads
better as SQL than as a builder expression. It runs unchanged on SQLite and PostgreSQL.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hermes_store.db.backends import backend_for
from hermes_store.db.execution import Bind, fetch_dicts, fetch_tuples
from hermes_store.domain.codec import CONTENT_JSON_PREFIX, preview_text
from hermes_store.domain.titles import escape_like
from hermes_store.repository import markers, system_prompts
from hermes_store.repository.lineage import MAX_DEPTH, compression_tips
from hermes_store.schema.file_layout import layout_of
from hermes_store.schema.models import Session

_SESSION_COLUMN_NAMES = tuple(column.name for column in Session.__table__.columns)
SESSION_COLUMNS_SQL = ", ".join(f"s.{name}" for name in _SESSION_COLUMN_NAMES)
"""Every column of ``sessions s``, for a listing's select list (shared with the Telegram
topics' listing of unlinked sessions)."""

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
LAST_ACTIVE_SQL = (
    "COALESCE((SELECT MAX(m2.timestamp) FROM messages m2 WHERE m2.session_id = s.id), s.started_at)"
)
"""A listing's ``last_active`` of session ``s``: its newest message's time, else its start."""


def preview_sql(db: Bind) -> tuple[str, dict[str, Any]]:
    """The SQL of session ``s``'s preview on ``db``'s backend, and its parameters; the
    value it selects is made a preview by :func:`finish_preview`."""
    starts_with_sentinel, params = backend_for(db).preview_starts_with_sentinel()
    return _PREVIEW.format(starts_with_sentinel=starts_with_sentinel), {**params, "lf": "\n", "cr": "\r"}


@dataclass(frozen=True)
class ListingFilter:
    """Which sessions a listing (or a count) takes in."""

    source: str | None = None
    exclude_sources: Sequence[str] | None = None
    include_children: bool = False
    cwd_prefix: str | None = None
    min_message_count: int = 0
    include_archived: bool = False
    archived_only: bool = False
    hide_hidden: bool = False
    """Leave out sessions upstream Hermes hides (its ``hidden`` flag, where the file has it)."""

    def where(self, db: Bind) -> tuple[str, dict[str, Any]]:
        """The SQL condition on alias ``s`` and its parameters."""
        # The backend may spell s.source with a planner hint (Backend.listing_source_column).
        source = backend_for(db).listing_source_column
        clauses = ["1 = 1"]
        params: dict[str, Any] = {}
        if not self.include_children:
            clauses.append(markers.listable(db, "s"))
        if self.source:
            clauses.append(f"{source} = :source")
            params["source"] = self.source
        if self.exclude_sources:
            clauses.append(f"{source} NOT IN :exclude_sources")
            params["exclude_sources"] = list(self.exclude_sources)
        if self.cwd_prefix:
            clause, cwd_params = _cwd_under(db, self.cwd_prefix)
            clauses.append(clause)
            params |= cwd_params
        if self.min_message_count > 0:
            clauses.append("s.message_count >= :min_message_count")
            params["min_message_count"] = self.min_message_count
        if self.archived_only:
            clauses.append("s.archived = 1")
        elif not self.include_archived:
            clauses.append("s.archived = 0")
        if self.hide_hidden and layout_of(db).hides_sessions:
            clauses.append("s.hidden = 0")
        return " AND ".join(clauses), params


def _case_blind_like(db: Bind) -> str:
    """The operator matching a ``LIKE`` pattern regardless of case (SQLite's ``LIKE``
    already ignores ASCII case; PostgreSQL's does not)."""
    return "ILIKE" if backend_for(db).name == "postgresql" else "LIKE"


def _cwd_under(db: Bind, cwd_prefix: str) -> tuple[str, dict[str, Any]]:
    """SQL true when ``s.cwd`` is the folder ``cwd_prefix`` or lies below it (``/`` or
    ``\\`` separated). A trailing separator is ignored; letters match in any case below
    the folder. ``%`` and ``_`` in the path are literal characters, not wildcards."""
    folder = cwd_prefix.rstrip("/\\") or cwd_prefix
    like = _case_blind_like(db)
    clause = (
        f"(s.cwd = :cwd_folder OR s.cwd {like} :cwd_below_slash ESCAPE '\\' "
        f"OR s.cwd {like} :cwd_below_backslash ESCAPE '\\')"
    )
    escaped = escape_like(folder)
    return clause, {
        "cwd_folder": folder,
        "cwd_below_slash": escaped + "/%",
        "cwd_below_backslash": escaped + "\\\\%",
    }


def rich_rows(db: Bind, listing: ListingFilter, limit: int, offset: int) -> list[dict[str, Any]]:
    """Sessions with ``preview`` (raw, see :func:`finish_preview`) and ``last_active``,
    newest first."""
    condition, params = listing.where(db)
    preview, preview_params = preview_sql(db)
    if offset:
        # The page's sessions first, from the started_at index; the preview and
        # last-activity subqueries then run for the page only, not for the skipped rows.
        sql = (
            f"SELECT {SESSION_COLUMNS_SQL}, {preview} AS preview, {LAST_ACTIVE_SQL} AS last_active FROM ("
            f"SELECT {SESSION_COLUMNS_SQL} FROM sessions s WHERE {condition} "
            "ORDER BY s.started_at DESC LIMIT :limit OFFSET :offset"
            ") s ORDER BY s.started_at DESC"
        )
    else:
        sql = (
            f"SELECT {SESSION_COLUMNS_SQL}, {preview} AS preview, {LAST_ACTIVE_SQL} AS last_active "
            f"FROM sessions s WHERE {condition} "
            "ORDER BY s.started_at DESC LIMIT :limit OFFSET :offset"
        )
    params |= {**preview_params, "limit": limit, "offset": offset}
    return fetch_dicts(db, sql, params, content_keys=("preview",))


@dataclass(frozen=True)
class ChainMatch:
    """Text a listing ordered by last activity may require of a row or of a session of its
    compression chain (empty: no requirement)."""

    id_query: str = ""
    """A substring of the id (any case)."""
    search_query: str = ""
    """A substring of the title or id (any case); a title also matches with ``-``, ``_``,
    ``.`` and spaces left out of both."""

    def where(self) -> tuple[str, dict[str, Any]]:
        """SQL on ``s`` (and the ``chain`` CTE) with its parameters; ``1 = 1`` if empty.

        Each test is made of the row itself, or of the set of chain roots that have a
        matching session: a semi-join, which the planner runs once for the whole
        statement rather than once per row."""
        clauses = ["1 = 1"]
        params: dict[str, Any] = {}
        id_needle = self.id_query.strip().lower()
        search_needle = self.search_query.strip().lower()
        if id_needle:
            params["id_needle"] = f"%{escape_like(id_needle)}%"
            clauses.append(
                f"({_ID_MATCHES.format(a='s')} OR s.id IN "
                f"(SELECT cq.root_id FROM chain cq WHERE {_ID_MATCHES.format(a='cq')}))"
            )
        if search_needle:
            params["search_needle"] = f"%{escape_like(search_needle)}%"
            compact_needle = re.sub(r"[\W_]+", "", search_needle)
            if compact_needle:
                params["compact_needle"] = f"%{escape_like(compact_needle)}%"

            def text_matches(alias: str) -> str:
                tests = [_TITLE_MATCHES.format(a=alias), _SEARCH_ID_MATCHES.format(a=alias)]
                if compact_needle:
                    tests.append(_COMPACT_TITLE_MATCHES.format(a=alias))
                return f"({' OR '.join(tests)})"

            clauses.append(
                f"({text_matches('s')} OR s.id IN (SELECT cq.root_id FROM chain cq "
                f"JOIN sessions cs ON cs.id = cq.id WHERE {text_matches('cs')}))"
            )
        return " AND ".join(clauses), params


_ID_MATCHES = "LOWER({a}.id) LIKE :id_needle ESCAPE '\\'"
_SEARCH_ID_MATCHES = "LOWER({a}.id) LIKE :search_needle ESCAPE '\\'"
_TITLE_MATCHES = "LOWER(COALESCE({a}.title, '')) LIKE :search_needle ESCAPE '\\'"
# A title lower-cased with the punctuation people type inconsistently left out.
_COMPACT_TITLE_MATCHES = (
    "REPLACE(REPLACE(REPLACE(REPLACE(LOWER(COALESCE({a}.title, '')), '-', ''), '_', ''), '.', ''), ' ', '')"
    " LIKE :compact_needle ESCAPE '\\'"
)


def rich_rows_by_last_active(
    db: Bind, listing: ListingFilter, limit: int, offset: int, match: ChainMatch | None = None
) -> list[dict[str, Any]]:
    """Like :func:`rich_rows`, ordered by the latest activity anywhere in each row's
    compression chain (so a conversation continued after compression sorts by its tip),
    keeping only rows that satisfy ``match``.

    Only a row that ended by compression has a chain to walk; every other row's activity
    is its own. So the recursive walk starts from those rows alone, and the preview is
    built for the page only.
    """
    condition, params = listing.where(db)
    matching, match_params = (match or ChainMatch()).where()
    preview, preview_params = preview_sql(db)
    sql = f"""
    WITH RECURSIVE chain(root_id, id, depth) AS (
        SELECT s.id, s.id, 0 FROM sessions s WHERE {condition} AND s.end_reason = 'compression'
        UNION ALL
        SELECT chain.root_id, c.id, chain.depth + 1
        FROM chain
        JOIN sessions p ON p.id = chain.id
        JOIN sessions c ON c.parent_session_id = p.id
        WHERE p.end_reason = 'compression' AND {markers.continues_chain(db, "c")}
          AND chain.depth < {MAX_DEPTH}
    ),
    chain_active AS (
        SELECT chain.root_id, MAX(COALESCE(
            (SELECT MAX(m.timestamp) FROM messages m WHERE m.session_id = chain.id),
            (SELECT cs.started_at FROM sessions cs WHERE cs.id = chain.id)
        )) AS active_at
        FROM chain GROUP BY chain.root_id
    ),
    page AS (
        SELECT {SESSION_COLUMNS_SQL}, COALESCE(ca.active_at, {LAST_ACTIVE_SQL}) AS active_at
        FROM sessions s LEFT JOIN chain_active ca ON ca.root_id = s.id
        WHERE {condition} AND {matching}
        ORDER BY active_at DESC, s.started_at DESC, s.id DESC
        LIMIT :limit OFFSET :offset
    )
    SELECT {SESSION_COLUMNS_SQL}, {preview} AS preview, {LAST_ACTIVE_SQL} AS last_active
    FROM page s
    ORDER BY s.active_at DESC, s.started_at DESC, s.id DESC
    """
    params |= {**match_params, **preview_params, "limit": limit, "offset": offset}
    return fetch_dicts(db, sql, params, content_keys=("preview",))


def count(db: Bind, listing: ListingFilter) -> int:
    """How many sessions ``listing`` takes in."""
    condition, params = listing.where(db)
    ((total,),) = fetch_tuples(db, f"SELECT COUNT(*) FROM sessions s WHERE {condition}", params)
    return int(total)


def cron_runs(db: Bind, job_id: str, limit: int, offset: int) -> list[dict[str, Any]]:
    """The ``cron`` sessions of job ``job_id`` (ids ``cron_<job_id>_…``), latest started
    first, with ``preview`` (raw) and ``last_active``.

    The ids are found by a range on ``(source, id)`` (the ``idx_sessions_source_id``
    index), so the cost follows the page, not the whole cron history. The range is the
    prefix up to the same text with its last character raised by one: exact under a
    byte-order collation (SQLite's, PostgreSQL's ``C``); the ``substr`` test keeps any
    other collation from admitting ids outside the prefix.
    """
    prefix = f"cron_{job_id}_"
    upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    preview, preview_params = preview_sql(db)
    sql = (
        f"SELECT {SESSION_COLUMNS_SQL}, {preview} AS preview, {LAST_ACTIVE_SQL} AS last_active FROM ("
        f"SELECT {SESSION_COLUMNS_SQL} FROM sessions s WHERE s.source = 'cron' "
        "AND s.id >= :prefix AND s.id < :upper AND substr(s.id, 1, :prefix_len) = :prefix "
        "ORDER BY s.started_at DESC, s.id DESC LIMIT :limit OFFSET :offset"
        ") s ORDER BY s.started_at DESC, s.id DESC"
    )
    params = {
        **preview_params,
        "prefix": prefix,
        "upper": upper,
        "prefix_len": len(prefix),
        "limit": limit,
        "offset": offset,
    }
    rows = fetch_dicts(db, sql, params, content_keys=("preview",))
    for row in rows:
        row["preview"] = finish_preview(row["preview"])
    return system_prompts.resolve(db, rows)


def rich_rows_for(db: Bind, session_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Sessions ``session_ids`` with their raw preview and last_active, by id."""
    preview, preview_params = preview_sql(db)
    sql = (
        f"SELECT {SESSION_COLUMNS_SQL}, {preview} AS preview, {LAST_ACTIVE_SQL} AS last_active "
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
        f"SELECT {SESSION_COLUMNS_SQL}, {LAST_ACTIVE_SQL} AS last_active FROM sessions s {where} "
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
    "cwd",
    "git_branch",
    "git_repo_root",
)


def rich_listing(
    db: Bind,
    listing: ListingFilter,
    limit: int,
    offset: int,
    *,
    order_by_last_active: bool = False,
    project_compression_tips: bool = True,
    match: ChainMatch | None = None,
) -> list[dict[str, Any]]:
    """``list_sessions_rich``: rows with a finished ``preview`` and ``last_active``.

    With ``project_compression_tips`` a session split by compression shows its latest
    continuation's details (and ``_lineage_root_id``): one query per link of the page's
    longest chain finds the tips, one more reads their rows. ``match`` applies only when
    ordering by last activity (the order that walks the chains in SQL).
    """
    if order_by_last_active:
        rows = rich_rows_by_last_active(db, listing, limit, offset, match)
    else:
        rows = rich_rows(db, listing, limit, offset)
    for row in rows:
        row["preview"] = finish_preview(row["preview"])
    if project_compression_tips:
        _project_tips(db, [row for row in rows if row.get("end_reason") == "compression"])
    return system_prompts.resolve(db, rows)


def finish_preview(raw: Any) -> str:
    """The preview text of a raw preview column: text parts of JSON content, flattened,
    stripped, at most 60 characters plus ``"..."``."""
    text = preview_text(raw)
    if isinstance(raw, str) and raw.startswith(CONTENT_JSON_PREFIX):
        text = text.replace("\n", " ").replace("\r", " ")[:63]
    text = text.strip()
    return text[:PREVIEW_CHARS] + "..." if len(text) > PREVIEW_CHARS else text


def _project_tips(db: Bind, roots: list[dict[str, Any]]) -> None:
    """Show each compression root with its tip's details: the tips of the whole page are
    walked together, and their rows read in one query."""
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
