"""Search on SQLite: FTS5 word index, FTS5 trigram index, or LIKE substrings.

Three query shapes, chosen by :func:`hermes_store.search.plan.plan_search`:

* ``fts`` — the unicode61 word index ``messages_fts``, best bm25 rank first;
* ``trigram`` — the trigram index ``messages_fts_trigram`` (CJK terms of 3+ characters);
* ``like`` — literal substrings over content, tool name and tool-call JSON, newest first.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy import orm

from hermes_store.errors_map import is_fts_query_rejection, is_missing_search_capability, raise_translated
from hermes_store.repository.rows import fetch_dicts
from hermes_store.search.filters import SearchFilters
from hermes_store.search.plan import SearchPlan, like_pattern

log = logging.getLogger(__name__)

SNIPPET_TOKENS = 40
LIKE_SNIPPET_BEFORE = 40
LIKE_SNIPPET_CHARS = 120
HUGE_ROW_CHARS = 65536


_HIT_COLUMNS = (
    "m.id, m.session_id, m.role, {snippet} AS snippet, m.timestamp, m.tool_name, "
    "s.source, s.model, s.started_at AS session_started"
)


def _fts_sql(table: str, where: str) -> str:
    # snippet() slows down quadratically with the matches inside one row; a huge row
    # (a 10 MB tool dump) gets a plain prefix instead of an unbounded wait.
    snippet = (
        f"CASE WHEN length(COALESCE(m.content, '')) + length(COALESCE(m.tool_calls, '')) > {HUGE_ROW_CHARS} "
        f"THEN substr(m.content, 1, {LIKE_SNIPPET_CHARS}) "
        f"ELSE snippet({table}, 0, '>>>', '<<<', '...', {SNIPPET_TOKENS}) END"
    )
    return (
        f"SELECT {_HIT_COLUMNS.format(snippet=snippet)} FROM {table} "
        f"JOIN messages m ON m.id = {table}.rowid JOIN sessions s ON s.id = m.session_id "
        f"WHERE {table} MATCH :match {where} ORDER BY rank LIMIT :limit OFFSET :offset"
    )


def _like_sql(term_count: int, where: str) -> str:
    conditions = " AND ".join(
        f"(m.content LIKE :p{i} ESCAPE '\\' OR m.tool_name LIKE :p{i} ESCAPE '\\' "
        f"OR m.tool_calls LIKE :p{i} ESCAPE '\\')"
        for i in range(term_count)
    )
    snippet = (
        f"substr(m.content, max(1, instr(m.content, :p_raw) - {LIKE_SNIPPET_BEFORE}), {LIKE_SNIPPET_CHARS})"
    )
    return (
        f"SELECT {_HIT_COLUMNS.format(snippet=snippet)} FROM messages m "
        f"JOIN sessions s ON s.id = m.session_id WHERE {conditions} {where} "
        "ORDER BY m.id DESC LIMIT :limit OFFSET :offset"
    )


def find_hits(
    db: orm.Session, plan: SearchPlan, filters: SearchFilters, limit: int, offset: int
) -> list[dict[str, Any]]:
    """The matching messages (without context) for ``plan``; ``[]`` on a query FTS5 rejects."""
    where, params = filters.sql()
    params |= {"limit": limit, "offset": offset}
    if plan.kind in ("fts", "trigram"):
        table = "messages_fts" if plan.kind == "fts" else "messages_fts_trigram"
        sql = _fts_sql(table, where)
        params["match"] = plan.match
    elif plan.kind == "like":
        sql = _like_sql(len(plan.like_terms), where)
        for index, term in enumerate(plan.like_terms):
            params[f"p{index}"] = like_pattern(term)
        params["p_raw"] = plan.like_terms[0]
    else:
        return []
    try:
        return fetch_dicts(db, sql, params)
    except sa_exc.OperationalError as exc:
        if is_missing_search_capability(exc):
            raise_translated(exc, "searching")
        if plan.kind == "like" or not is_fts_query_rejection(exc):
            raise
        # The sanitiser should make this unreachable; a query FTS5 still rejects finds nothing.
        log.warning("FTS5 rejected search %r: %s", plan.match, exc)
        return []
