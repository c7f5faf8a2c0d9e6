"""What every PostgreSQL search statement shares: the filters' ``FROM`` clause, the page's
columns, and the first round trip that sets the transaction's search memory."""

from __future__ import annotations

from typing import Any

from sqlalchemy import orm

from hermes_store.db.execution import fetch_tuples
from hermes_store.search.filters import SearchFilters


def filtered_source(filters: SearchFilters, params: dict[str, Any]) -> tuple[str, str]:
    """The ``FROM`` clause the filters need and their conditions.

    ``sessions`` is joined while finding matches only when a source filter needs it:
    hashing tens of thousands of sessions for every search costs more than the search.
    The rows of the returned page are joined to their sessions afterwards.
    """
    where, extra = filters.sql()
    params.update(extra)
    needs_sessions = filters.sources is not None or bool(filters.exclude_sources)
    source = "messages m JOIN sessions s ON s.id = m.session_id" if needs_sessions else "messages m"
    return source, where


PAGE_COLUMNS = (
    "m.id, m.session_id, m.role, {snippet} AS snippet, m.timestamp, m.tool_name, "
    "s.source, s.model, s.started_at AS session_started"
)


SEARCH_WORK_MEM = "32MB"
"""``work_mem`` of a search's transaction. With the server's default (4 MB) the bitmap of a
common trigram (251,159 rows of a million for ``word``) turns lossy, and intersecting it
with the CJK gram index's bitmap then rechecks every candidate row of the lossy pages —
reading them and recomputing the gram function: 4–7 s for ``word 这个`` and ``roth 如果``
at a million messages, against 130 ms with exact bitmaps (16 MB was enough there; the
bitmaps grow with the store). It is a limit per plan node of this one transaction, not
memory held."""


def newest_id_with_search_memory(db: orm.Session) -> Any:
    """The newest message id; the same round trip gives the search's transaction
    :data:`SEARCH_WORK_MEM` and no parallel workers (``set_config(…, true)``: until the
    transaction ends). A search's statements read a few thousand rows at most; starting
    workers for one cost 35 ms at ten million messages (a lookup of all older ids that
    found one candidate in 0.2 ms took 38 ms, most of it the workers' start)."""
    sql = (
        "SELECT max(id), set_config('work_mem', :work_mem, true),"
        " set_config('max_parallel_workers_per_gather', '0', true) FROM messages"
    )
    return fetch_tuples(db, sql, {"work_mem": SEARCH_WORK_MEM})[0][0]
