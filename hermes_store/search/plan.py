"""Decide how a search query runs: word index, or literal substrings narrowed by trigrams.

Two semantics, chosen per query (``docs/search.md`` is the reference):

* **Word search** (``fts``): queries in scripts that separate words with spaces (Latin,
  Cyrillic, Greek, Arabic, ...), with nothing but letters, digits and the FTS5 syntax.
  The sanitised query runs against the unicode61 word index, as upstream does.
* **Substring search** (``trigram`` or ``like``): a query with any CJK character, any
  character of a script written without spaces (Thai, Lao, Khmer, Myanmar) or any symbol
  such as an emoji. Every term must occur as a literal substring (ASCII case-insensitive)
  of the message's indexed text; ``AND``/``OR``/``NOT`` keep their FTS5 meaning. When every
  alternative has a term of three or more characters the trigram index narrows the
  candidates first (``trigram``); otherwise every message is checked (``like``).

Deciding is pure string work, kept here apart from the SQL so every branch can be tested
without a database.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from hermes_store.domain.titles import escape_like
from hermes_store.search.cjk import is_cjk_codepoint
from hermes_store.search.sanitize import FTS5_OPERATORS, MAX_FTS5_QUERY_CHARS, sanitize_fts5_query

__all__ = [
    "MIN_TRIGRAM_TERM",
    "SearchPlan",
    "TermGroup",
    "ascii_lower",
    "has_ascii_letter",
    "like_pattern",
    "needs_substring_search",
    "plan_search",
]

MAX_QUERY_TERMS = 64
"""More terms are refused: each is a condition, and SQLite caps expression depth."""

MIN_TRIGRAM_TERM = 3
"""The trigram index cannot match a term shorter than this many characters."""

SearchKind = Literal["empty", "fts", "trigram", "like"]

# Scripts written without spaces between words: unicode61 would index a whole sentence as
# one "word", so word search could never find a word inside it.
_UNSPACED_SCRIPTS = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x19E0, 0x19FF))

# Same set as the sanitiser's: control characters and lone surrogates become spaces.
_UNSAFE_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
# A balanced quoted phrase, a run of other non-space characters, or a stray quote.
_ATOM = re.compile(r'"([^"]*)"|[^\s"]+|"')
# FTS5 grouping characters mean nothing on the substring path and are never a search term;
# a colon separates terms there as it separates words in the sanitised word query.
_GROUPING = str.maketrans("(){}^:", "      ")


@dataclass(frozen=True)
class TermGroup:
    """One alternative of a substring query: all of ``required``, none of ``excluded``."""

    required: tuple[str, ...]
    excluded: tuple[str, ...] = ()


@dataclass(frozen=True)
class SearchPlan:
    """How to run one search.

    ``kind`` is ``"empty"`` (return no results), ``"fts"`` (run ``match`` against the word
    index) or one of the two substring kinds. For those, a message is a hit when it
    satisfies any of ``groups`` (see :class:`TermGroup`), each term a literal,
    ASCII-case-insensitive substring of the indexed text. ``"trigram"`` comes with a
    ``match`` for the trigram index that every hit satisfies (it names only terms of 3+
    characters), so only its candidates need checking; ``"like"`` must check every
    message. ``like_terms`` lists the required terms, in query order, once each.
    """

    kind: SearchKind
    match: str | None = None
    like_terms: tuple[str, ...] = ()
    groups: tuple[TermGroup, ...] = ()


def needs_substring_search(text: str) -> bool:
    """Whether ``text`` holds a character word search cannot find (CJK, unspaced scripts, symbols)."""
    if text.isascii():  # no ASCII character is one of them (tested); most queries are ASCII
        return False
    return any(_is_substring_char(char) for char in text)


def _is_substring_char(char: str) -> bool:
    code = ord(char)
    if is_cjk_codepoint(code) or any(start <= code <= end for start, end in _UNSPACED_SCRIPTS):
        return True
    # "So" is every emoji and pictograph (🚀 ✅ ©); unicode61 treats them as separators.
    return unicodedata.category(char) == "So"


def plan_search(query: str) -> SearchPlan:
    """Choose the search path for ``query``.

    Only the first :data:`~hermes_store.search.sanitize.MAX_FTS5_QUERY_CHARS` characters
    are read, on both paths.

    * Empty input, or input that leaves no term: ``empty``.
    * More than 64 terms: ``ValueError`` (see the limit above).
    * No CJK, unspaced-script or symbol character: ``fts`` with the sanitised query.
    * Otherwise a substring plan over the query's terms: balanced ``"quoted phrases"`` are
      one term each (spaces included), other terms are split on whitespace and on ``:``
      and the FTS5 grouping characters ``( ) { } ^``, and upper-case
      ``AND``/``OR``/``NOT`` are operators with FTS5's precedence (``NOT`` binds tightest,
      ``OR`` loosest; at either end, or several in a row, they are repaired as the
      sanitiser does).
    """
    query = query[:MAX_FTS5_QUERY_CHARS]
    if not query.strip():
        return SearchPlan("empty")
    text = _UNSAFE_CHARS.sub(" ", query)
    if needs_substring_search(text):
        return _substring_plan(text)
    sanitized = sanitize_fts5_query(text)
    if not sanitized:
        return SearchPlan("empty")
    _check_term_count(len(sanitized.split()))
    return SearchPlan("fts", match=sanitized)


def _check_term_count(count: int) -> None:
    if count > MAX_QUERY_TERMS:
        raise ValueError(f"search query has too many terms ({count}, max {MAX_QUERY_TERMS})")


def _substring_atoms(text: str) -> list[tuple[bool, str]]:
    """The query's ``(is_operator, text)`` atoms on the substring path."""
    atoms: list[tuple[bool, str]] = []
    for found in _ATOM.finditer(text):
        phrase = found.group(1)
        if phrase is not None:
            if phrase.strip():
                atoms.append((False, phrase.strip()))
            continue
        for part in found.group(0).translate(_GROUPING).split():
            if part in FTS5_OPERATORS:
                atoms.append((True, part))
                continue
            # A star is a prefix search in FTS5; every substring is already a prefix match.
            part = part.strip("*")
            # A term of ASCII punctuation alone (``-``, ``:``) is syntax, not something to find.
            if any(char.isalnum() or not char.isascii() for char in part):
                atoms.append((False, part))
    return atoms


def _substring_plan(text: str) -> SearchPlan:
    atoms = _substring_atoms(text)
    _check_term_count(sum(1 for is_operator, _ in atoms if not is_operator))
    groups: list[tuple[list[str], list[str]]] = []
    required: list[str] = []
    excluded: list[str] = []
    pending: str | None = None
    for is_operator, atom in atoms:
        if is_operator:
            # Leading operators are dropped; of several in a row the last one wins.
            pending = atom if required else None
            continue
        if pending == "OR":
            groups.append((required, excluded))
            required, excluded = [], []
        (excluded if pending == "NOT" else required).append(atom)
        pending = None
    if required:
        groups.append((required, excluded))
    if not groups:
        return SearchPlan("empty")
    term_groups = tuple(
        TermGroup(tuple(dict.fromkeys(req)), tuple(dict.fromkeys(exc))) for req, exc in groups
    )
    like_terms = tuple(dict.fromkeys(term for group in term_groups for term in group.required))
    narrow = _trigram_narrowing(term_groups)
    if narrow is None:
        return SearchPlan("like", like_terms=like_terms, groups=term_groups)
    return SearchPlan("trigram", match=narrow, like_terms=like_terms, groups=term_groups)


def _trigram_narrowing(groups: tuple[TermGroup, ...]) -> str | None:
    """A trigram MATCH every hit satisfies, or ``None`` when some alternative has no long term.

    Only required terms of 3+ characters are named: the index cannot match shorter ones,
    and excluded terms are checked afterwards.
    """
    alternatives: list[str] = []
    for group in groups:
        long_terms = [_quote(term) for term in group.required if len(term) >= MIN_TRIGRAM_TERM]
        if not long_terms:
            return None
        alternatives.append(" AND ".join(long_terms))
    if len(alternatives) == 1:
        return alternatives[0]
    return " OR ".join(f"({alternative})" for alternative in alternatives)


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def has_ascii_letter(term: str) -> bool:
    """Whether ``term`` holds an ASCII letter, the only characters whose case the
    substring semantics (and SQLite's ``LIKE``) fold."""
    return any(char.isascii() and char.isalpha() for char in term)


def ascii_lower(text: str) -> str:
    """``text`` with only ASCII ``A``-``Z`` lower-cased, as SQLite's ``LIKE`` compares."""
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def like_pattern(term: str) -> str:
    r"""A ``LIKE ... ESCAPE '\'`` pattern matching ``term`` anywhere, wildcards escaped."""
    return f"%{escape_like(term)}%"
