"""Search on SQLite: FTS5 word index, or literal substrings narrowed by the trigram index.

Three query shapes, chosen by :func:`hermes_store.search.plan.plan_search`:

* ``fts`` — the unicode61 word index ``messages_fts``, best bm25 rank first;
* ``trigram`` — substrings: the trigram index ``messages_fts_trigram`` names the
  candidates (through the plan's terms of 3+ characters), ``LIKE`` checks every term;
* ``like`` — substrings with no term the trigram index can use: ``LIKE`` on every message.

Both substring shapes return the newest hits first, so SQLite can stop reading the index
as soon as a page is full. Asked for time order (``newest``/``oldest``), every shape sorts
its hits by ``timestamp`` first and keeps its own order for ties; such a search reads every
hit, as upstream Hermes' does, but builds snippets for the page only.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy import orm

from hermes_store.db.execution import fetch_dicts
from hermes_store.db.sqlite_errors import (
    is_fts_query_rejection,
    is_missing_search_capability,
    raise_translated,
)
from hermes_store.schema.indexed_text import INDEXED_TEXT
from hermes_store.search.filters import SearchFilters
from hermes_store.search.order import SearchOrder
from hermes_store.search.plan import MIN_TRIGRAM_TERM, SearchPlan, has_ascii_letter, like_pattern

log = logging.getLogger(__name__)

SNIPPET_TOKENS = 40
LIKE_SNIPPET_BEFORE = 40
LIKE_SNIPPET_CHARS = 120
HUGE_ROW_CHARS = 65536


_HIT_COLUMNS = (
    "m.id, m.session_id, m.role, {snippet} AS snippet, m.timestamp, m.tool_name, "
    "s.source, s.model, s.started_at AS session_started"
)


def _fts_snippet(table: str) -> str:
    # snippet() slows down quadratically with the matches inside one row; a huge row
    # (a 10 MB tool dump) gets a plain prefix instead of an unbounded wait.
    return (
        f"CASE WHEN length(COALESCE(m.content, '')) + length(COALESCE(m.tool_calls, '')) > {HUGE_ROW_CHARS} "
        f"THEN substr(m.content, 1, {LIKE_SNIPPET_CHARS}) "
        f"ELSE snippet({table}, 0, '>>>', '<<<', '...', {SNIPPET_TOKENS}) END"
    )


def order_by(order: SearchOrder, by_relevance: str) -> str:
    """The ``ORDER BY`` clause of ``order`` for a path whose own order is ``by_relevance``."""
    if order == "newest":
        return f"ORDER BY m.timestamp DESC, {by_relevance}"
    if order == "oldest":
        return f"ORDER BY m.timestamp ASC, {by_relevance}"
    return f"ORDER BY {by_relevance}"


def _indexed_sql(table: str, conditions: str, order: SearchOrder, by_relevance: str) -> str:
    """A page of the hits of ``table MATCH :match`` that also meet ``conditions`` (each
    with its leading ``AND``), in ``order``.

    In relevance order FTS5 hands the matches over best first, so ``LIMIT`` stops it
    after a page and only the page's rows pay for ``snippet()``. In time order every match
    is sorted; building a snippet for each (the row's text tokenized again) cost ten times
    the sort (5.3 s against 0.5 s for ``the`` at 200,000 messages). So the page's ids are
    chosen first, and only their rows are matched again, by rowid, for their snippets.
    """
    joins = f"JOIN messages m ON m.id = {table}.rowid JOIN sessions s ON s.id = m.session_id"
    ordered = order_by(order, by_relevance)
    if order == "rank":
        return (
            f"SELECT {_HIT_COLUMNS.format(snippet=_fts_snippet(table))} FROM {table} {joins} "
            f"WHERE {table} MATCH :match {conditions} {ordered} LIMIT :limit OFFSET :offset"
        )
    page = (
        f"SELECT m.id FROM {table} {joins} WHERE {table} MATCH :match {conditions} {ordered} "
        "LIMIT :limit OFFSET :offset"
    )
    return (
        f"SELECT {_HIT_COLUMNS.format(snippet=_fts_snippet(table))} FROM {table} {joins} "
        f"WHERE {table} MATCH :match AND {table}.rowid IN ({page}) {ordered}"
    )


def _fts_sql(where: str, order: SearchOrder) -> str:
    return _indexed_sql("messages_fts", where, order, "rank")


def substring_condition(plan: SearchPlan, params: dict[str, Any]) -> str:
    """The exact check of a substring plan: any group whose required terms all occur and
    whose excluded terms do not. Binds one ``LIKE`` pattern per distinct term.

    A term without a space cannot span the spaces that join content, tool name and tool
    calls in the indexed text, so it is checked column by column, which spares building
    that text for every candidate. Terms the trigram index did not check (under three
    characters) come first, so most candidates are rejected by the first test.
    """
    names: dict[str, str] = {}

    def test(term: str) -> str:
        literal = not has_ascii_letter(term)
        if term not in names:
            names[term] = f"p{len(names)}"
            params[names[term]] = term if literal else like_pattern(term)
        name = names[term]
        if " " in term:
            return _contains(INDEXED_TEXT, name, literal)
        # IFNULL: a NULL column must count as "not found", also under NOT.
        return " OR ".join(
            _contains(f"IFNULL(m.{column}, '')", name, literal) for column in _SEARCHED_COLUMNS
        )

    groups = []
    for group in plan.groups:
        required = sorted(group.required, key=lambda term: len(term) >= MIN_TRIGRAM_TERM)
        tests = [f"({test(term)})" for term in required] + [f"NOT ({test(term)})" for term in group.excluded]
        groups.append(" AND ".join(tests))
    return "(" + " OR ".join(f"({group})" for group in groups) + ")"


_SEARCHED_COLUMNS = ("content", "tool_name", "tool_calls")


def _contains(text: str, name: str, literal: bool) -> str:
    """Whether ``text`` holds the term bound as ``name``. LIKE folds the case of ASCII
    letters only, so for a term without any (CJK, digits, symbols) it is exactly
    ``instr``, which skips LIKE's pattern matching (10-15 % of a CJK search)."""
    if literal:
        return f"instr({text}, :{name}) > 0"
    return f"{text} LIKE :{name} ESCAPE '\\'"


def _trigram_sql(condition: str, where: str, order: SearchOrder) -> str:
    return _indexed_sql(
        "messages_fts_trigram", f"AND {condition} {where}", order, "messages_fts_trigram.rowid DESC"
    )


def _like_sql(condition: str, where: str, order: SearchOrder) -> str:
    snippet = (
        f"substr(m.content, max(1, instr(m.content, :p_raw) - {LIKE_SNIPPET_BEFORE}), {LIKE_SNIPPET_CHARS})"
    )
    return (
        f"SELECT {_HIT_COLUMNS.format(snippet=snippet)} FROM messages m "
        f"JOIN sessions s ON s.id = m.session_id WHERE {condition} {where} "
        f"{order_by(order, 'm.id DESC')} LIMIT :limit OFFSET :offset"
    )


def statement(
    plan: SearchPlan, filters: SearchFilters, limit: int, offset: int, order: SearchOrder = "rank"
) -> tuple[str, dict[str, Any]] | None:
    """The SQL and parameters that run ``plan`` in ``order``, or ``None`` for an empty plan."""
    where, params = filters.sql()
    params |= {"limit": limit, "offset": offset}
    if plan.kind == "fts":
        params["match"] = plan.match
        return _fts_sql(where, order), params
    if plan.kind == "trigram":
        params["match"] = plan.match
        return _trigram_sql(substring_condition(plan, params), where, order), params
    if plan.kind == "like":
        params["p_raw"] = plan.like_terms[0]
        return _like_sql(substring_condition(plan, params), where, order), params
    return None


def find_hits(
    db: orm.Session,
    plan: SearchPlan,
    filters: SearchFilters,
    limit: int,
    offset: int,
    order: SearchOrder = "rank",
) -> list[dict[str, Any]]:
    """The matching messages (without context) for ``plan`` in ``order``; ``[]`` on a
    query FTS5 rejects."""
    built = statement(plan, filters, limit, offset, order)
    if built is None:
        return []
    sql, params = built
    try:
        return fetch_dicts(db, sql, params)
    except sa_exc.OperationalError as exc:
        if is_missing_search_capability(exc):
            raise_translated(exc, "searching")
        if plan.kind != "fts" or not is_fts_query_rejection(exc):
            raise
        # The sanitiser should make this unreachable; a query FTS5 still rejects finds nothing.
        log.warning("FTS5 rejected search %r: %s", plan.match, exc)
        return []
