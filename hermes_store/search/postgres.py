"""Search on PostgreSQL: ``tsvector``/GIN for words, ``pg_trgm``/``ILIKE`` for CJK and substrings.

The same sanitised query as on SQLite is translated from the FTS5 subset we accept —
words, ``AND``/``OR``/``NOT``, quoted phrases, ``prefix*`` — into a ``tsquery`` built
from bound parameters (``phraseto_tsquery`` per term, so no user text is ever spliced
into SQL or into tsquery syntax). The ``simple`` configuration lower-cases and does not
stem, like FTS5's unicode61 (it does not fold diacritics, unlike unicode61).

Both indexes cover the same text as SQLite's FTS5 tables:
``content || ' ' || tool_name || ' ' || tool_calls``. Differences from SQLite are listed
in ``docs/postgresql.md``.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import orm

from hermes_store.repository.rows import fetch_dicts
from hermes_store.search.engine import SearchFilters
from hermes_store.search.plan import SearchPlan, like_pattern

INDEXED_TEXT = (
    "(COALESCE(m.content, '') || ' ' || COALESCE(m.tool_name, '') || ' ' || COALESCE(m.tool_calls, ''))"
)
TSVECTOR = f"to_tsvector('simple'::regconfig, {INDEXED_TEXT})"
HEADLINE_OPTIONS = (
    "StartSel=>>>, StopSel=<<<, MaxWords=40, MinWords=15, ShortWord=0, MaxFragments=1, FragmentDelimiter=..."
)
SNIPPET_CHARS = 120

_TOKEN = re.compile(r'"[^"]*"\*?|\S+')
_OPERATORS = ("AND", "OR", "NOT")


def tsquery_sql(match: str, params: dict[str, Any]) -> str | None:
    """Translate a sanitised FTS5 query into a tsquery SQL expression over bound terms.

    Precedence follows FTS5: ``NOT`` (binary "and not") binds tighter than ``AND``
    (explicit or implicit), which binds tighter than ``OR``. Returns ``None`` when no
    term remains.
    """
    alternatives: list[str] = []
    clause: list[str] = []
    pending_not = False
    for token in _TOKEN.findall(match):
        if token in _OPERATORS:
            if token == "OR":
                if clause:
                    alternatives.append("(" + " && ".join(clause) + ")")
                clause = []
                pending_not = False
            elif token == "NOT":
                pending_not = True
            continue
        term = _term_sql(token, params)
        if term is None:
            continue
        clause.append(f"!!{term}" if pending_not else term)
        pending_not = False
    if clause:
        alternatives.append("(" + " && ".join(clause) + ")")
    if not alternatives:
        return None
    return "(" + " || ".join(alternatives) + ")"


def _term_sql(token: str, params: dict[str, Any]) -> str | None:
    prefix = token.endswith("*")
    body = token.rstrip("*")
    if body.startswith('"') and body.endswith('"') and len(body) >= 2:
        body = body[1:-1].replace('""', '"')
    if not body.strip():
        return None
    name = f"t{len(params)}"
    params[name] = body
    if prefix and re.fullmatch(r"\w+", body):
        return f"to_tsquery('simple'::regconfig, quote_literal(lower(:{name})) || ':*')"
    return f"phraseto_tsquery('simple'::regconfig, :{name})"


def _filters(filters: SearchFilters, params: dict[str, Any]) -> str:
    where, extra = filters.sql()
    params.update(extra)
    return where


def find_hits(
    db: orm.Session, plan: SearchPlan, filters: SearchFilters, limit: int, offset: int
) -> list[dict[str, Any]]:
    """The matching messages (without context) for ``plan`` on PostgreSQL."""
    params: dict[str, Any] = {"limit": limit, "offset": offset}
    if plan.kind == "fts" and plan.match:
        query = tsquery_sql(plan.match, params)
        if query is None:
            return []
        where = _filters(filters, params)
        sql = f"""
        WITH q AS (SELECT {query} AS query),
        hits AS (
            SELECT m.id, ts_rank({TSVECTOR}, q.query) AS score
            FROM messages m JOIN sessions s ON s.id = m.session_id, q
            WHERE {TSVECTOR} @@ q.query {where}
            ORDER BY score DESC, m.id DESC
            LIMIT :limit OFFSET :offset
        )
        SELECT m.id, m.session_id, m.role,
               ts_headline('simple'::regconfig, {INDEXED_TEXT}, q.query, :headline) AS snippet,
               m.timestamp, m.tool_name, s.source, s.model, s.started_at AS session_started
        FROM hits JOIN messages m ON m.id = hits.id JOIN sessions s ON s.id = m.session_id, q
        ORDER BY hits.score DESC, m.id DESC
        """
        params["headline"] = HEADLINE_OPTIONS
        return fetch_dicts(db, sql, params)
    condition, terms = _substring_condition(plan, params)
    if not terms:
        return []
    where = _filters(filters, params)
    sql = f"""
    SELECT m.id, m.session_id, m.role, m.content AS snippet, m.timestamp, m.tool_name,
           s.source, s.model, s.started_at AS session_started
    FROM messages m JOIN sessions s ON s.id = m.session_id
    WHERE {condition} {where}
    ORDER BY m.id DESC
    LIMIT :limit OFFSET :offset
    """
    hits = fetch_dicts(db, sql, params, content_keys=("snippet",))
    for hit in hits:
        hit["snippet"] = substring_snippet(hit["snippet"], terms[0], marked=plan.kind == "trigram")
    return hits


def _substring_condition(plan: SearchPlan, params: dict[str, Any]) -> tuple[str, list[str]]:
    """The conditions of a substring plan (any group: all required terms, no excluded
    one), and its required terms in order.

    A term is matched exactly, lower-casing ASCII letters only, as SQLite's ``LIKE``
    does: a term without ASCII letters is a plain ``LIKE``; one with ASCII letters is an
    ``ILIKE`` (which folds more, and which a ``pg_trgm`` index on the indexed text can
    answer for 3+ characters) confirmed by a regular expression with ``[xX]`` for each
    letter, run only on the rows the ``ILIKE`` lets through.
    """
    if plan.kind not in ("like", "trigram"):
        return "", []
    names: dict[str, str] = {}

    def test(term: str) -> str:
        if term not in names:
            names[term] = f"p{len(names)}"
            params[names[term]] = like_pattern(term)
            if _has_ascii_letter(term):
                params[names[term] + "r"] = _ascii_insensitive_regex(term)
        name = names[term]
        if not _has_ascii_letter(term):
            return f"{INDEXED_TEXT} LIKE :{name} ESCAPE '\\'"
        return f"({INDEXED_TEXT} ILIKE :{name} ESCAPE '\\' AND {INDEXED_TEXT} ~ :{name}r)"

    groups = [
        " AND ".join(
            [test(term) for term in group.required] + [f"NOT {test(term)}" for term in group.excluded]
        )
        for group in plan.groups
    ]
    return "(" + " OR ".join(f"({group})" for group in groups) + ")", list(plan.like_terms)


def _has_ascii_letter(term: str) -> bool:
    return any(char.isascii() and char.isalpha() for char in term)


def _ascii_insensitive_regex(term: str) -> str:
    """A POSIX regular expression matching ``term`` literally, ASCII letters in either case."""
    out = []
    for char in term:
        if char.isascii() and char.isalpha():
            out.append(f"[{char.lower()}{char.upper()}]")
        elif char.isascii() and not char.isalnum():
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def substring_snippet(content: Any, term: str, marked: bool) -> str | None:
    """A 120-character window of ``content`` around ``term`` (case-insensitive).

    ``marked`` wraps the match in ``>>>``/``<<<`` as FTS5's trigram snippet does; the
    plain LIKE path leaves it unmarked, as on SQLite.
    """
    if not isinstance(content, str):
        return None
    position = content.lower().find(term.lower())
    if position < 0:
        return content[:SNIPPET_CHARS]
    start = max(0, position - 40)
    window = content[start : start + SNIPPET_CHARS]
    if not marked:
        return window
    local = position - start
    end = local + len(term)
    return window[:local] + ">>>" + window[local:end] + "<<<" + window[end:]
