"""Turn free text typed by a user or an agent into a safe SQLite FTS5 MATCH expression.

The function works in two passes.

1. **Upstream's rewrite**, step for step: the input is cut to
   :data:`MAX_FTS5_QUERY_CHARS` characters, balanced quoted phrases are protected (one
   left-to-right pass pairs each quote with the next; an unpaired one becomes a space),
   ``+ { } ( ) : " ^`` become spaces (so ``TODO: fix`` searches ``TODO fix`` and
   ``foo:bar`` the two words ``foo bar``), ``*`` runs are collapsed and loose stars
   dropped, one operator is dropped at each end, and dotted, hyphenated or underscored
   compounds (``chat-send``, ``P2.2``, ``sp_new``) are quoted as phrases. Whenever that
   output is a valid FTS5 query it is the final answer, so callers written against
   upstream see the same strings.
2. **Repair**. The result is lexed the way FTS5 lexes it. When FTS5 would
   reject it, or would read part of it as a column filter (``-foo``), it is
   rebuilt: each whitespace-separated chunk that is not plain words, phrases and prefix
   stars becomes one quoted literal (or is dropped when it holds no letter or digit, like a
   lone ``-``), operators at either end are dropped, and of several operators in a row
   only the last is kept. The rebuilt query always parses.

Before either pass, control characters (including NUL, which pass 1 uses to mark protected
phrases) and lone surrogates are turned into spaces: FTS5 rejects most of them, and a NUL
from the user must never be mistaken for a placeholder.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

from hermes_store.search.cjk import is_cjk_codepoint

__all__ = ["FTS5_OPERATORS", "MAX_FTS5_QUERY_CHARS", "sanitize_fts5_query"]

MAX_FTS5_QUERY_CHARS = 2048
"""Search queries are cut to this many characters before anything else reads them, as
upstream Hermes does: no one types a longer query, and a bound keeps the cost of
sanitising and matching a hostile one small."""

FTS5_OPERATORS = frozenset({"AND", "OR", "NOT"})
"""The binary operators of the FTS5 query language; FTS5 only knows them in upper case."""

# Tab, LF and CR are whitespace to FTS5; every other C0 character and DEL is a syntax
# error there, and a lone surrogate cannot even be bound as UTF-8.
_UNSAFE_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")

_STRIPPED_CHARS = re.compile(r'[+{}():"^]')
_STAR_RUN = re.compile(r"\*+")
_LOOSE_STAR = re.compile(r"(^|\s)\*")
_LEADING_OPERATOR = re.compile(r"^(?:AND|OR|NOT)\b\s*", re.IGNORECASE)
_TRAILING_OPERATOR = re.compile(r"\s+(?:AND|OR|NOT)$", re.IGNORECASE)
_COMPOUND_TERM = re.compile(r"\b\w+(?:[._-]+\w+)+\b")
_PLACEHOLDER = re.compile("\x00Q([0-9]+)\x00")

_FTS5_SPACE = frozenset(" \t\n\r")

_TokenKind = Literal["phrase", "word", "star", "junk"]
_Token = tuple[_TokenKind, str]


def sanitize_fts5_query(query: str) -> str:
    """Make ``query`` safe to pass to an FTS5 ``MATCH``.

    Returns ``""`` when no letter or digit is left to search for, otherwise an expression
    that FTS5 with the unicode61 tokenizer parses without error. Balanced ``"quoted
    phrases"``, prefix stars (``deploy*``) and ``AND``/``OR``/``NOT`` between terms keep
    their meaning. When upstream Hermes' output for ``query`` is a valid FTS5 query, that
    output is returned unchanged; the module docstring says how the others are repaired.
    """
    candidate = _upstream_rewrite(_UNSAFE_CHARS.sub(" ", query[:MAX_FTS5_QUERY_CHARS]))
    chunks = _lex(candidate)
    if not _is_valid([token for chunk in chunks for token in chunk]):
        candidate = _rebuild(chunks)
    # A query with no letter or digit left (``""``, ``_``) would parse but match nothing.
    return candidate if any(_is_searchable(char) for char in candidate) else ""


def _upstream_rewrite(text: str) -> str:
    """Upstream's six sanitising steps; ``text`` must not contain NUL."""
    text, phrases = _protect_phrases(text)
    text = _STRIPPED_CHARS.sub(" ", text)
    text = _STAR_RUN.sub("*", text)
    text = _LOOSE_STAR.sub(r"\1", text)
    text = _LEADING_OPERATOR.sub("", text.strip(), count=1)
    text = _TRAILING_OPERATOR.sub("", text.strip(), count=1)
    text = _COMPOUND_TERM.sub(lambda match: f'"{match.group(0)}"', text)
    text = _PLACEHOLDER.sub(lambda match: phrases[int(match.group(1))], text)
    return text.strip()


def _protect_phrases(text: str) -> tuple[str, list[str]]:
    """``text`` with each balanced ``"phrase"`` replaced by a NUL-delimited placeholder,
    and the phrases in order.

    One pass from the left: a quote pairs with the next quote; a quote with none after it
    becomes a space. Each character is looked at once, whatever runs of quotes the input
    holds.
    """
    phrases: list[str] = []
    pieces: list[str] = []
    position = 0
    while True:
        opening = text.find('"', position)
        if opening < 0:
            pieces.append(text[position:])
            break
        closing = text.find('"', opening + 1)
        if closing < 0:
            pieces.append(text[position:opening] + " " + text[opening + 1 :])
            break
        phrases.append(text[opening : closing + 1])
        pieces.append(f"{text[position:opening]}\x00Q{len(phrases) - 1}\x00")
        position = closing + 1
    return "".join(pieces), phrases


def _is_bareword_char(char: str) -> bool:
    # FTS5 accepts any byte >= 0x80 in a bareword, so every non-ASCII character qualifies.
    return not char.isascii() or char.isalnum() or char == "_"


def _lex(text: str) -> list[list[_Token]]:
    """Split ``text`` into FTS5 tokens, grouped by the whitespace that separates them."""
    chunks: list[list[_Token]] = []
    current: list[_Token] = []
    position, end = 0, len(text)
    while position < end:
        char = text[position]
        if char in _FTS5_SPACE:
            if current:
                chunks.append(current)
                current = []
            position += 1
        elif char == '"':
            close = _closing_quote(text, position)
            if close < 0:
                current.append(("junk", char))
                position += 1
            else:
                current.append(("phrase", text[position : close + 1]))
                position = close + 1
        elif _is_bareword_char(char):
            start = position
            while position < end and _is_bareword_char(text[position]):
                position += 1
            current.append(("word", text[start:position]))
        else:
            current.append(("star" if char == "*" else "junk", char))
            position += 1
    if current:
        chunks.append(current)
    return chunks


def _closing_quote(text: str, opening: int) -> int:
    """Index of the quote that ends the FTS5 string opened at ``opening``, or -1."""
    search_from = opening + 1
    while True:
        close = text.find('"', search_from)
        if close < 0:
            return -1
        # Inside an FTS5 string a doubled quote stands for one literal quote.
        if text.startswith('"', close + 1):
            search_from = close + 2
            continue
        return close


def _is_valid(tokens: list[_Token]) -> bool:
    """Whether FTS5 accepts ``tokens`` as a query with no column filter."""
    previous: Literal["start", "term", "op", "star"] = "start"
    for kind, text in tokens:
        if kind == "junk":
            return False
        if kind == "star":
            if previous != "term":
                return False
            previous = "star"
        elif kind == "word" and text in FTS5_OPERATORS:
            if previous in ("start", "op"):
                return False
            previous = "op"
        else:
            previous = "term"
    return previous != "op"


def _rebuild(chunks: list[list[_Token]]) -> str:
    """Rebuild a query FTS5 rejected into one it accepts; see the module docstring."""
    atoms: list[tuple[bool, str]] = []  # (is_operator, text)
    for chunk in chunks:
        if _is_plain(chunk):
            for kind, text in chunk:
                if kind == "star":
                    is_operator, previous = atoms[-1]
                    atoms[-1] = (is_operator, previous + "*")
                else:
                    atoms.append((kind == "word" and text in FTS5_OPERATORS, text))
        else:
            literal = _literal(chunk)
            if literal:
                atoms.append((False, literal))

    kept: list[tuple[bool, str]] = []
    for is_operator, text in atoms:
        if is_operator and not kept:
            continue
        if is_operator and kept[-1][0]:
            # "a AND NOT b" most likely means "a NOT b", so the last operator wins.
            kept[-1] = (is_operator, text)
            continue
        kept.append((is_operator, text))
    while kept and kept[-1][0]:
        kept.pop()
    return " ".join(text for _, text in kept)


def _is_plain(chunk: list[_Token]) -> bool:
    """Whether a chunk is only words, phrases and stars that each follow a term."""
    after_term = False
    for kind, text in chunk:
        if kind == "junk":
            return False
        if kind == "star":
            if not after_term:
                return False
            after_term = False
        else:
            after_term = not (kind == "word" and text in FTS5_OPERATORS)
    return True


def _literal(chunk: list[_Token]) -> str:
    """Quote a whole chunk as one phrase, keeping a final ``*`` as a prefix search.

    Returns ``""`` when the chunk holds nothing the tokenizer would index (``-``, ``::``),
    because an empty phrase would only add noise to the query.
    """
    body = ""
    for kind, text in chunk:
        piece = (text[1:-1] if kind == "phrase" else text).replace('"', " ")
        # Two pieces that were separate FTS5 tokens must not fuse into one word.
        if body and piece and _is_indexable(body[-1]) and _is_indexable(piece[0]):
            body += " "
        body += piece
    body = body.strip()
    prefix = body.endswith("*")
    body = body.rstrip("*").strip()
    if not any(_is_searchable(char) for char in body):
        return ""
    return f'"{body}"' + ("*" if prefix else "")


def _is_searchable(char: str) -> bool:
    # A CJK query never reaches the word index: the trigram index and the substring scan
    # match CJK punctuation (。〜「」) too, so it must survive sanitising.
    return _is_indexable(char) or is_cjk_codepoint(ord(char))


def _is_indexable(char: str) -> bool:
    # unicode61's default token characters are the categories L*, N* and Co.
    category = unicodedata.category(char)
    return category[0] in "LN" or category == "Co"
