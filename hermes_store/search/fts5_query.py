"""Read a sanitised FTS5 query as FTS5 reads it, and write it as a PostgreSQL ``tsquery``.

PostgreSQL's word search must find what SQLite's FTS5 finds, so the query is parsed with
FTS5's grammar (``fts5parse.y``), not with ``websearch_to_tsquery``:

* a term is a bareword or a ``"quoted phrase"``, cut into words by unicode61
  (:func:`hermes_store.search.unicode61.words`); several words make a phrase (adjacent
  positions, ``<->``); a ``*`` after it makes its last word a prefix (``:*``);
* terms side by side are an implicit AND that binds tightest, then ``NOT`` (binary: "and
  not"), then ``AND``, then ``OR``; all left-associative. So ``a NOT b c`` is
  ``a AND NOT (b AND c)``;
* a term with no word in it (``"..."``) matches nothing, except beside other terms of an
  implicit AND, where FTS5 drops it: ``foo "..."`` is ``foo``, ``"..." AND foo`` nothing.

The result is ``tsquery`` input text (lexemes quoted by
:func:`~hermes_store.search.unicode61.quote_lexeme`) passed as one bound parameter; no
user text reaches the SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise

from hermes_store.search.unicode61 import MAX_LEXEME_BYTES, quote_lexeme, words

__all__ = ["parse_word_query"]

# A quoted string ("" inside is one quote), a star, an operator or a bareword; anything
# else separates (the sanitiser leaves nothing else, and FTS5 would reject it).
_LEXEME = re.compile(r'"((?:[^"]|"")*)"|(\*)|([^\s"*()]+)')
_OPERATORS = {"AND": 2, "OR": 1, "NOT": 3}


@dataclass(frozen=True)
class _Term:
    text: str
    prefix: bool


def _lex(match: str) -> list[str | _Term]:
    items: list[str | _Term] = []
    for found in _LEXEME.finditer(match):
        quoted, star, bare = found.groups()
        if star is not None:
            if items and isinstance(items[-1], _Term):
                items[-1] = _Term(items[-1].text, True)
            continue
        if bare is not None and bare in _OPERATORS:
            items.append(bare)
            continue
        items.append(_Term(quoted.replace('""', '"') if quoted is not None else bare, False))
    return items


@dataclass(frozen=True)
class _Node:
    """A rendered ``tsquery`` fragment, and the adjacent word pairs (``"a b"``) every
    message it matches holds."""

    text: str
    pairs: frozenset[str]


Node = _Node | None
"""A parsed fragment, or ``None`` for "matches nothing"."""


def _phrase(term: _Term) -> Node:
    tokens = [word for word in words(term.text) if len(word.encode("utf-8")) <= MAX_LEXEME_BYTES]
    if not tokens:
        return None
    parts = [quote_lexeme(token) for token in tokens]
    if term.prefix:
        parts[-1] += ":*"
    # A prefix word is not a whole lexeme: no pair ends in it.
    whole = tokens[:-1] if term.prefix else tokens
    pairs = frozenset(f"{left} {right}" for left, right in pairwise(whole))
    if len(parts) == 1:
        return _Node(parts[0], pairs)
    return _Node("(" + " <-> ".join(parts) + ")", pairs)


def _implicit_and(terms: list[_Term]) -> Node:
    phrases = [phrase for phrase in (_phrase(term) for term in terms) if phrase is not None]
    if not phrases:
        return None
    if len(phrases) == 1:
        return phrases[0]
    text = "(" + " & ".join(phrase.text for phrase in phrases) + ")"
    return _Node(text, frozenset().union(*(phrase.pairs for phrase in phrases)))


def _combine(operator: str, left: Node, right: Node) -> Node:
    if operator == "OR":
        if left is None or right is None:
            return left if right is None else right
        # Only a pair both sides require is required of every match.
        return _Node(f"({left.text} | {right.text})", left.pairs & right.pairs)
    if left is None:
        return None  # nothing AND x, nothing NOT x
    if right is None:
        return None if operator == "AND" else left
    if operator == "AND":
        return _Node(f"({left.text} & {right.text})", left.pairs | right.pairs)
    return _Node(f"({left.text} & !{right.text})", left.pairs)


def parse_word_query(match: str) -> tuple[str, list[str]] | None:
    """The sanitised FTS5 query ``match`` parsed: its ``tsquery`` and, sorted, the adjacent
    word pairs (``"a b"``, lexemes as stored) that every message matching it holds — those
    of its phrases that the query requires (an ``OR`` keeps the pairs both sides require,
    ``NOT`` none of its right side); ``None`` when it matches nothing."""
    parsed = _parse(match)
    return None if parsed is None else (parsed.text, sorted(parsed.pairs))


def _parse(match: str) -> Node:
    operands: list[Node] = []
    operators: list[str] = []
    run: list[_Term] = []
    expect_operand = True

    def reduce_while(precedence: int) -> None:
        while operators and _OPERATORS[operators[-1]] >= precedence:
            right, left = operands.pop(), operands.pop()
            operands.append(_combine(operators.pop(), left, right))

    for item in _lex(match):
        if isinstance(item, _Term):
            run.append(item)
            expect_operand = False
            continue
        if expect_operand:
            continue  # an operator where a term belongs (the sanitiser never leaves one)
        operands.append(_implicit_and(run))
        run = []
        reduce_while(_OPERATORS[item])
        operators.append(item)
        expect_operand = True
    if run:
        operands.append(_implicit_and(run))
    elif operators:
        operators.pop()  # a trailing operator
    if not operands:
        return None
    reduce_while(0)
    return operands[0]
