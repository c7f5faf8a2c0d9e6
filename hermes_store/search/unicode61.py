"""SQLite's ``unicode61`` tokenizer (``remove_diacritics 1``), in Python and in PostgreSQL SQL.

PostgreSQL's own text-search parser cuts words where FTS5 does not (``my.app_config.ts``
is one token there, four in unicode61) and never folds diacritics, so the same word query
found different messages on the two backends. Revision 0014 instead indexes PostgreSQL's
``search_vector`` with :func:`postgres_vector_functions` — unicode61 written in SQL — and
search turns the query into a ``tsquery`` with :func:`words`, the same tokenizer in
Python. Both are built from one table, :mod:`.unicode61_data`, which
``scripts/generate_unicode61_table.py`` reads off SQLite itself (every code point, put
between two letters, tokenized by FTS5); ``tests/search/test_unicode61.py`` holds the
Python and SQL versions equal to the running SQLite.

unicode61 in short: a word is a maximal run of "token characters" (letters, digits,
private-use and unassigned code points; everything else separates), each character
folded on its own (lower case, Latin diacritics removed, combining diacritics dropped).
A word left empty by folding is skipped without taking a position.
"""

from __future__ import annotations

import re

from hermes_store.search.unicode61_data import FOLDS, TOKEN_RANGES

__all__ = [
    "MAX_LEXEME_BYTES",
    "MAX_POSITION",
    "postgres_vector_functions",
    "quote_lexeme",
    "words",
]

MAX_POSITION = 16383
"""The largest word position a ``tsvector`` stores; later words all share it."""
MAX_LEXEME_BYTES = 2046
"""PostgreSQL refuses a longer lexeme; such a word is left out of the vector (and of queries)."""


def _python_class(ranges: tuple[tuple[int, int], ...]) -> str:
    parts = []
    for start, end in ranges:
        parts.append(
            re.escape(chr(start)) if start == end else f"{re.escape(chr(start))}-{re.escape(chr(end))}"
        )
    return "[" + "".join(parts) + "]"


_WORD = re.compile(_python_class(TOKEN_RANGES) + "+")
_FOLD_TABLE: dict[int, int | None] = {cp: (None if target < 0 else target) for cp, target in FOLDS.items()}


def words(text: str) -> list[str]:
    """``text`` cut into folded words, exactly as SQLite's unicode61 tokenizer cuts it."""
    out = []
    for word in _WORD.findall(text):
        folded = word.translate(_FOLD_TABLE)
        if folded:
            out.append(folded)
    return out


def quote_lexeme(word: str) -> str:
    """``word`` as a quoted lexeme of ``tsvector``/``tsquery`` input syntax."""
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def _sql_escape(cp: int) -> str:
    return f"\\u{cp:04X}" if cp <= 0xFFFF else f"\\U{cp:08X}"


def _sql_class(ranges: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> str:
    parts = []
    for start, end in ranges:
        parts.append(_sql_escape(start) if start == end else f"{_sql_escape(start)}-{_sql_escape(end)}")
    return "[" + "".join(parts) + "]"


def _ranges(codepoints: list[int]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for cp in sorted(codepoints):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return ranges


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _lexeme_sql(word: str, position: str) -> str:
    # A quoted tsvector lexeme with its position: 'word':pos (quotes doubled, backslashes escaped).
    return (
        f"'''' || replace(replace({word}, '\\', '\\\\'), '''', '''''') || ''':' "
        f"|| LEAST({position}, {MAX_POSITION})"
    )


_FOLD_GROUPS = ((0x80, 0xFF), (0x100, 0x24F), (0x250, 0x3FF), (0x400, 0x52F), (0x1E00, 0x1FFF))
"""Blocks whose folds get a ``translate`` of their own (Latin-1, Latin Extended, IPA and
Greek, Cyrillic, Latin and Greek Extended); the rest share one. ``translate`` reads its
whole mapping for every character that is not in it, so short mappings keep it cheap."""


def _fold_groups() -> list[list[int]]:
    groups: list[list[int]] = [[] for _ in range(len(_FOLD_GROUPS) + 1)]
    for cp in sorted(cp for cp in FOLDS if cp > 0x7F):
        index = next(
            (i for i, (low, high) in enumerate(_FOLD_GROUPS) if low <= cp <= high), len(_FOLD_GROUPS)
        )
        groups[index].append(cp)
    return [group for group in groups if group]


# Over 60 lines: most of it is the two functions' SQL text, kept whole so it reads as SQL.
def postgres_vector_functions(name: str) -> tuple[str, str]:
    """``CREATE OR REPLACE FUNCTION`` statements of ``name(doc text) RETURNS tsvector``,
    unicode61 in SQL, and of the word folding it calls, ``name_fold(word text)``.

    Words are the matches of one regular expression (the token-character ranges written
    as ``\\uXXXX`` escapes, so the server's locale plays no part) over the text with its
    ASCII letters lower-cased by the ``C`` collation. In a text holding a character that
    folds, each non-ASCII word is then folded by one ``translate`` per block of folding
    characters it holds (see :data:`_FOLD_GROUPS`). Positions count the non-empty words
    from 1, as FTS5's do, capped at :data:`MAX_POSITION`; words longer than
    :data:`MAX_LEXEME_BYTES` are left out.
    """
    non_ascii = sorted(cp for cp in FOLDS if cp > 0x7F)
    fold_class = _sql_literal(_sql_class(_ranges(non_ascii)))
    word_class = _sql_literal(_sql_class(TOKEN_RANGES) + "+")
    words_of = f"regexp_matches(lower(doc COLLATE \"C\"), {word_class}, 'g')"
    steps = []
    for group in _fold_groups():
        mapped = [cp for cp in group if FOLDS[cp] >= 0]
        dropped = [cp for cp in group if FOLDS[cp] < 0]
        # translate() deletes the characters of its first list that have no partner.
        source = _sql_literal("".join(chr(cp) for cp in mapped + dropped))
        target = _sql_literal("".join(chr(FOLDS[cp]) for cp in mapped))
        group_class = _sql_literal(_sql_class(_ranges(group)))
        steps.append(f"    IF word ~ {group_class} THEN word := translate(word, {source}, {target}); END IF;")
    fold_steps = "\n".join(steps)
    fold = f"""CREATE OR REPLACE FUNCTION {name}_fold(word text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
BEGIN
    IF octet_length(word) = length(word) THEN
        RETURN word;  -- ASCII, lower-cased already
    END IF;
{fold_steps}
    RETURN word;
END
$fn$"""
    vector = f"""CREATE OR REPLACE FUNCTION {name}(doc text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
BEGIN
    IF doc !~ {fold_class} THEN
        -- Nothing folds but ASCII letters: every match is a word, in order.
        RETURN (
            SELECT COALESCE(string_agg({_lexeme_sql("t.parts[1]", "t.pos")}, ' ')::tsvector, ''::tsvector)
            FROM {words_of} WITH ORDINALITY AS t(parts, pos)
            WHERE octet_length(t.parts[1]) <= {MAX_LEXEME_BYTES}
        );
    END IF;
    RETURN (
        SELECT COALESCE(string_agg({_lexeme_sql("w.lexeme", "w.pos")}, ' ')::tsvector, ''::tsvector)
        FROM (
            SELECT f.lexeme, row_number() OVER (ORDER BY f.ord) AS pos
            FROM (
                SELECT t.ord, {name}_fold(t.parts[1]) AS lexeme
                FROM {words_of} WITH ORDINALITY AS t(parts, ord)
            ) AS f
            WHERE f.lexeme <> ''  -- a word of diacritics alone: FTS5 skips it, position and all
        ) AS w
        WHERE octet_length(w.lexeme) <= {MAX_LEXEME_BYTES}
    );
END
$fn$"""
    return fold, vector
