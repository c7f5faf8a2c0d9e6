"""The FTS5 query sanitiser: upstream's outputs where FTS5 accepts them, never a syntax error.

Every row of upstream's sanitiser example table is pinned here. The rows whose upstream output FTS5
rejects (so upstream's search returned []) are pinned to our repaired output, and a real
FTS5 table checks both that the output parses and that the message is found.
"""

from __future__ import annotations

import sqlite3
import time
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# Upstream's example table, rows whose upstream output FTS5 accepts: kept byte for byte.
from support import UPSTREAM_SANITIZER_ROWS as UPSTREAM_ROWS

from hermes_store.search.sanitize import MAX_FTS5_QUERY_CHARS, sanitize_fts5_query

# Rows whose upstream output FTS5 rejects: (query, upstream output, our output, a message
# the query must find). Upstream's outputs for "a-b-" and "user_id=5" are FTS5 syntax errors
# too, so they are repaired the same way.
REPAIRED_ROWS = [
    ("-foo", "-foo", '"-foo"', "foo bar"),
    ("hello - world", "hello - world", "hello world", "hello world"),
    ("a AND OR b", "a AND OR b", "a OR b", "a b"),
    ("a-b-", '"a-b"-', '"a-b-"', "see a-b- here"),
    ("user_id=5", '"user_id"=5', '"user_id=5"', "where user_id=5;"),
]

# Further repairs: what each kind of FTS5 hazard turns into.
REPAIR_EXAMPLES = [
    ("python NOT java", "python NOT java"),
    ("a AND NOT b", "a NOT b"),
    ("AND OR x", "x"),
    ("x AND* y", 'x "AND"* y'),
    ("content:foo", "content foo"),
    ("foo:bar*", "foo bar*"),
    ('"my phrase":x', '"my phrase" x'),
    ("it's", '"it\'s"'),
    ("50%", '"50%"'),
    ("a , b", "a b"),
    ("- - -", ""),
    ("a.b", '"a.b"'),
    ('"a"AND', '"a"'),
    ("NEAR(a b)", "NEAR a b"),
    ("x:y:z OR w", "x y z OR w"),
    ('""', ""),
    ("_", ""),
    ("hello\x0bworld", "hello world"),
]

# Upstream's newer rules: ``:`` is stripped like the other FTS5 syntax characters (a colon
# query was a column filter, an error, and so no hits), except inside a quoted phrase.
COLON_ROWS = [
    ("foo:bar", "foo bar"),
    ("TODO: fix", "TODO  fix"),
    ("error:timeout", "error timeout"),
    ("a:b:c", "a b c"),
    (":leading", "leading"),
    ("trailing:", "trailing"),
    ('"x:y" z', '"x:y" z'),
    ("foo:bar-baz", 'foo "bar-baz"'),
    ("::", ""),
]

DOCUMENTS = [
    "foo bar",
    "hello world",
    "a b",
    "see a-b- here",
    "where user_id=5;",
    "python is not java",
    "deploy the chat-send service",
]


def _fts_table(*rows: str) -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE VIRTUAL TABLE t USING fts5(content)")
    connection.executemany("INSERT INTO t(content) VALUES (?)", [(row,) for row in rows])
    return connection


def _matches(connection: sqlite3.Connection, expression: str) -> list[str]:
    rows = connection.execute("SELECT content FROM t WHERE t MATCH ? ORDER BY rowid", (expression,))
    return [row[0] for row in rows]


# Shared by the hypothesis tests, which cannot take function-scoped fixtures.
_SHARED = _fts_table(*DOCUMENTS)


@pytest.mark.parametrize(("query", "expected"), UPSTREAM_ROWS)
def test_keeps_upstream_output(query: str, expected: str) -> None:
    assert sanitize_fts5_query(query) == expected


@pytest.mark.parametrize(("query", "expected"), UPSTREAM_ROWS)
def test_upstream_rows_parse_in_fts5(query: str, expected: str) -> None:
    if expected:
        _matches(_SHARED, sanitize_fts5_query(query))


@pytest.mark.parametrize(("query", "upstream", "expected", "document"), REPAIRED_ROWS)
def test_repaired_rows_parse_and_find_the_message(
    query: str, upstream: str, expected: str, document: str
) -> None:
    """Upstream's output raises inside FTS5, so its search returned []; ours parses and finds."""
    connection = _fts_table(document, "unrelated text")
    with pytest.raises(sqlite3.OperationalError):
        _matches(connection, upstream)

    sanitized = sanitize_fts5_query(query)

    assert sanitized == expected
    assert _matches(connection, sanitized) == [document]


@pytest.mark.parametrize(("query", "expected"), REPAIR_EXAMPLES)
def test_repair_examples(query: str, expected: str) -> None:
    sanitized = sanitize_fts5_query(query)

    assert sanitized == expected
    if sanitized:
        _matches(_SHARED, sanitized)


@pytest.mark.parametrize(("query", "expected"), COLON_ROWS)
def test_colon_is_stripped(query: str, expected: str) -> None:
    sanitized = sanitize_fts5_query(query)

    assert sanitized == expected
    if sanitized:
        _matches(_SHARED, sanitized)


def test_colon_query_finds_the_words_apart() -> None:
    connection = _fts_table("TODO fix the deployment script", "TODO later", "fix it")

    assert _matches(connection, sanitize_fts5_query("TODO: fix")) == ["TODO fix the deployment script"]
    assert _matches(connection, sanitize_fts5_query("fix:TODO")) == ["TODO fix the deployment script"]


def test_input_is_cut_to_max_chars_first() -> None:
    assert MAX_FTS5_QUERY_CHARS == 2048
    kept = "a " * (MAX_FTS5_QUERY_CHARS // 2)

    assert sanitize_fts5_query(kept + "zebra") == kept.strip()
    # A quote that pairs only with one past the cut is unmatched, so it becomes a space.
    cut_phrase = "x" * (MAX_FTS5_QUERY_CHARS - 3) + ' "a b"'
    assert sanitize_fts5_query(cut_phrase) == "x" * (MAX_FTS5_QUERY_CHARS - 3) + "  a"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ('"a" "b" "c', '"a" "b"  c'),
        ('say "one two" and "three', 'say "one two" and  three'),
        ('"""', ""),
        ('""x""', '""x""'),
        ('a"b"c', 'a"b"c'),
    ],
)
def test_quotes_pair_from_the_left(query: str, expected: str) -> None:
    """Each quote pairs with the next one; one left without a partner becomes a space."""
    sanitized = sanitize_fts5_query(query)

    assert sanitized == expected
    if sanitized:
        _matches(_SHARED, sanitized)


def test_hostile_quote_runs_are_bounded_in_time() -> None:
    query = ('"' * 100_000) + ("a." * 100_000) + ("*" * 100_000)

    started = time.perf_counter()
    sanitized = sanitize_fts5_query(query)

    assert time.perf_counter() - started < 0.5
    assert len(sanitized) <= 2 * MAX_FTS5_QUERY_CHARS


def test_not_in_the_middle_keeps_its_meaning() -> None:
    connection = _fts_table("python and java", "python only")

    assert _matches(connection, sanitize_fts5_query("python NOT java")) == ["python only"]


def test_prefix_star_is_kept() -> None:
    assert _matches(_SHARED, sanitize_fts5_query("deploy*")) == ["deploy the chat-send service"]


def test_balanced_phrase_is_kept() -> None:
    assert sanitize_fts5_query('"hello world" foo') == '"hello world" foo'


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("a\x00b", "a b"),
        ("\x00Q0\x00", "Q0"),
        ('"x" \x00Q0\x00 y', '"x"  Q0  y'),
        ("\x00", ""),
        ("hello\x00 OR", "hello"),
    ],
)
def test_nul_never_reaches_the_output(query: str, expected: str) -> None:
    """A user NUL must not be taken for the phrase placeholder, nor truncate the query."""
    sanitized = sanitize_fts5_query(query)

    assert sanitized == expected
    assert "\x00" not in sanitized


def test_lone_surrogate_is_dropped() -> None:
    assert sanitize_fts5_query("ab\ud800cd") == "ab cd"


@pytest.mark.parametrize(
    "query",
    ["_" * 20000 + "-", "a_" * 10000 + "-", "a-" * 10000, '"' * 10001, "AND " * 5000, "a AND " * 5000],
)
def test_long_hostile_input_is_handled(query: str) -> None:
    sanitized = sanitize_fts5_query(query)

    if sanitized:
        _matches(_SHARED, sanitized)


FTS5_FRAGMENTS = st.sampled_from(
    [
        '"',
        '""',
        "*",
        "-",
        ":",
        "^",
        "(",
        ")",
        "{",
        "}",
        "+",
        ",",
        ".",
        "_",
        "%",
        "=",
        "'",
        "\\",
        "AND",
        "OR",
        "NOT",
        "NEAR",
        "NEAR(",
        "and",
        "or",
        "x:y",
        "content:",
        " ",
        " ",
        "\t",
        "\n",
        "\x00",
        "\x0b",
        "\x1a",
        "\u3000",
        "\xa0",
        "a",
        "b",
        "foo",
        "é",
        "记忆",
        "断裂",
        "한국",
        "ｶﾀｶﾅ",
        "5",
    ]
)
HOSTILE_QUERIES = st.lists(FTS5_FRAGMENTS, max_size=30).map("".join)


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_any_text_gives_empty_or_a_query_fts5_parses(query: str) -> None:
    sanitized = sanitize_fts5_query(query)

    assert "\x00" not in sanitized
    if sanitized:
        _matches(_SHARED, sanitized)


@settings(max_examples=500, deadline=None)
@given(HOSTILE_QUERIES)
def test_fts5_syntax_soup_gives_empty_or_a_query_fts5_parses(query: str) -> None:
    sanitized = sanitize_fts5_query(query)

    assert "\x00" not in sanitized
    if sanitized:
        _matches(_SHARED, sanitized)


# No upper-case letters: upper-case AND/OR/NOT are operators and change what matches.
LITERAL_QUERIES = st.lists(
    st.sampled_from(
        [
            *['"', "*", "-", ":", "^", "(", ")", "+", ".", "_", ",", "%", "=", "'", "{", "}", " "],
            *["a", "b", "foo", "and", "or", "not", "near", "é", "记忆", "断裂", "x:y", "-z", "1.2"],
        ]
    ),
    min_size=1,
    max_size=20,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(LITERAL_QUERIES)
def test_message_holding_the_query_text_is_found(query: str) -> None:
    """Whatever the punctuation, searching for a message's own text finds it."""
    sanitized = sanitize_fts5_query(query)
    if not sanitized or not any(unicodedata.category(char)[0] in "LN" for char in query):
        return
    connection = _fts_table(query)

    assert _matches(connection, sanitized) == [query]
