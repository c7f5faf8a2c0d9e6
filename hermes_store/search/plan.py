"""Decide how a search query runs: word index, trigram index or literal substrings.

The unicode61 word index cannot split CJK text into words, so a query with CJK characters
goes to the trigram index, or, when a term is too short for trigrams, to ``LIKE``
substring matching. Deciding is pure string work, kept here apart from the SQL so every
branch can be tested without a database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hermes_store.search.cjk import count_cjk
from hermes_store.search.sanitize import FTS5_OPERATORS, sanitize_fts5_query
from hermes_store.titles import escape_like

__all__ = ["MIN_TRIGRAM_TERM", "SearchPlan", "like_pattern", "plan_search"]

MAX_QUERY_CHARS = 4096
"""Longer queries are refused: FTS5's snippet() grows quadratically with matches per row."""
MAX_QUERY_TERMS = 64
"""More terms are refused: each is a condition, and SQLite caps expression depth."""

MIN_TRIGRAM_TERM = 3
"""The trigram index cannot match a term shorter than this many characters."""

SearchKind = Literal["empty", "fts", "trigram", "like"]


@dataclass(frozen=True)
class SearchPlan:
    """How to run one search.

    ``kind`` is ``"empty"`` (return no results), ``"fts"`` or ``"trigram"`` (run ``match``
    against the word or trigram FTS5 table) or ``"like"`` (every string in ``like_terms``
    must occur in the message, as a literal substring; see :func:`like_pattern`).
    """

    kind: SearchKind
    match: str | None = None
    like_terms: tuple[str, ...] = ()


def plan_search(query: str) -> SearchPlan:
    """Choose the search path for ``query`` (upstream-behaviour §8.2, contract §4.1).

    * Empty input, or input the sanitiser reduces to nothing: ``empty``.
    * More than 4,096 characters or 64 terms: ``ValueError`` (see the limits above).
    * No CJK in the sanitised query: ``fts`` with the sanitised query.
    * Otherwise the outer quotes are stripped from the sanitised query and it is split on
      whitespace. With fewer than three CJK characters in all: ``like`` on the whole text
      as one substring, as upstream does. When every term has at least three characters:
      ``trigram``, each term quoted and upper-case ``AND``/``OR``/``NOT`` kept as
      operators. Otherwise (``你好 世界``): ``like`` with each term as a substring that
      must occur; operators are ignored on this path.
    """
    if not query.strip():
        return SearchPlan("empty")
    if len(query) > MAX_QUERY_CHARS:
        raise ValueError(f"search query too long ({len(query)} chars, max {MAX_QUERY_CHARS})")
    sanitized = sanitize_fts5_query(query)
    if not sanitized:
        return SearchPlan("empty")
    term_count = len(sanitized.split())
    if term_count > MAX_QUERY_TERMS:
        raise ValueError(f"search query has too many terms ({term_count}, max {MAX_QUERY_TERMS})")
    raw = sanitized.strip('"').strip()
    cjk_chars = count_cjk(raw)
    if cjk_chars == 0:
        return SearchPlan("fts", match=sanitized)
    if cjk_chars < MIN_TRIGRAM_TERM:
        return SearchPlan("like", like_terms=(raw,))

    tokens = [token for token in (part.strip('"') for part in raw.split()) if token]
    terms = [token for token in tokens if token not in FTS5_OPERATORS]
    if all(len(term) >= MIN_TRIGRAM_TERM for term in terms):
        return SearchPlan("trigram", match=_trigram_match(tokens))
    return SearchPlan("like", like_terms=tuple(dict.fromkeys(terms)))


def _trigram_match(tokens: list[str]) -> str:
    """Quote every term; keep operators only where FTS5 allows a binary operator.

    Operators at either end are dropped and of several in a row the last one wins, the
    same repair the sanitiser applies; they can appear here when stripping the outer
    quotes exposes the inside of a phrase.
    """
    parts: list[str] = []
    previous_is_operator = False
    for token in tokens:
        if token in FTS5_OPERATORS:
            if not parts:
                continue
            if previous_is_operator:
                parts[-1] = token
            else:
                parts.append(token)
            previous_is_operator = True
        else:
            parts.append('"' + token.replace('"', '""') + '"')
            previous_is_operator = False
    if parts and previous_is_operator:
        parts.pop()
    return " ".join(parts)


def like_pattern(term: str) -> str:
    r"""A ``LIKE ... ESCAPE '\'`` pattern matching ``term`` anywhere, wildcards escaped."""
    return f"%{escape_like(term)}%"
