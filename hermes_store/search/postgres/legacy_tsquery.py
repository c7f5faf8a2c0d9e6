"""Word queries for a database at revisions 0011–0013, whose vectors are PostgreSQL's own.

Those stored vectors hold the words of PostgreSQL's ``simple`` parser, not unicode61's, so
a query is translated term by term into ``phraseto_tsquery``/``to_tsquery`` over bound
values instead of being parsed with FTS5's grammar (:mod:`hermes_store.search.fts5_query`).
"""

from __future__ import annotations

import re
from typing import Any

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
