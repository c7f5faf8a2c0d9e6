"""unicode61 in Python and in PostgreSQL SQL, held equal to the running SQLite's FTS5.

The tokenizer data (``hermes_store/search/unicode61_data.py``) was read off SQLite; these
tests check it against the SQLite running here, code point by code point and on random
text, then check the SQL version of the tokenizer and the ``tsquery`` translation of FTS5
queries against FTS5 itself on a real PostgreSQL server.
"""

from __future__ import annotations

import random
import sqlite3
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_catalog import revision_module

from hermes_store.search.fts5_query import parse_word_query
from hermes_store.search.sanitize import sanitize_fts5_query
from hermes_store.search.unicode61 import MAX_POSITION, postgres_vector_functions, words

ALPHABET = (
    "abcxyzABCXYZ0123456789 _-.,;:'\"\\/()*+%$#@!?\t\n"
    "éÉèàÀçÇñÑöÖüÜßæÆøØåÅłŁœŒĳǅǈǋ"  # Latin with diacritics, ligatures, title case
    "\u0300\u0301\u0308\u0327\u20dd"  # combining marks
    "αβΓΔωΩάέήЖжЯяЁёİıſ"  # Greek, Cyrillic, Turkish i, long s
    "中文字東京한국어ひらがなカタカナ"  # CJK
    "٣४²½ⅷ①🚀✅©\u200b\u00a0\ue000\U00010400\U0001d400"  # numbers, symbols, spaces, private use
)

texts = st.text(alphabet=ALPHABET, max_size=60)


def to_tsquery_text(match: str) -> str | None:
    """The tsquery of ``match`` (``parse_word_query``'s first part), or ``None``."""
    parsed = parse_word_query(match)
    return None if parsed is None else parsed[0]


def required_word_pairs(match: str) -> list[str]:
    """The word pairs ``match`` requires (``parse_word_query``'s second part)."""
    parsed = parse_word_query(match)
    return [] if parsed is None else parsed[1]


class Fts5:
    """An in-memory FTS5 table (default tokenizer) that reports how it tokenized a text."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE docs USING fts5(x)")
        self.db.execute("CREATE VIRTUAL TABLE terms USING fts5vocab(docs, 'instance')")

    def tokenize_all(self, batch: list[str]) -> list[list[str]]:
        self.db.execute("DELETE FROM docs")
        self.db.executemany("INSERT INTO docs(rowid, x) VALUES (?, ?)", enumerate(batch, 1))
        found: dict[int, list[tuple[int, str]]] = {}
        for doc, offset, term in self.db.execute("SELECT doc, offset, term FROM terms"):
            found.setdefault(doc, []).append((offset, term))
        return [[term for _, term in sorted(found.get(number, []))] for number in range(1, len(batch) + 1)]

    def matches(self, query: str) -> set[int]:
        return {row[0] for row in self.db.execute("SELECT rowid FROM docs WHERE docs MATCH ?", (query,))}


@pytest.fixture(scope="module")
def fts5() -> Fts5:
    return Fts5()


def test_every_basic_plane_code_point_tokenizes_as_fts5(fts5: Fts5) -> None:
    points = [cp for cp in range(0x10000) if not 0xD800 <= cp <= 0xDFFF]
    batch = [f"q{chr(cp)}z" for cp in points]
    expected = fts5.tokenize_all(batch)
    wrong = [
        f"U+{cp:04X}" for cp, text, want in zip(points, batch, expected, strict=True) if words(text) != want
    ]
    assert wrong == []


def test_a_sample_of_the_other_planes_tokenizes_as_fts5(fts5: Fts5) -> None:
    rng = random.Random(61)
    points = [rng.randrange(0x10000, 0x110000) for _ in range(20_000)]
    batch = [f"q{chr(cp)}z" for cp in points]
    expected = fts5.tokenize_all(batch)
    assert [words(text) for text in batch] == expected


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(texts, min_size=1, max_size=20))
def test_random_text_tokenizes_as_fts5(fts5: Fts5, batch: list[str]) -> None:
    assert [words(text) for text in batch] == fts5.tokenize_all(batch)


def test_words_fold_case_and_latin_diacritics_and_cut_at_punctuation() -> None:
    assert words("Café my.app_config.ts") == ["cafe", "my", "app", "config", "ts"]
    assert words("a \u0301 b") == ["a", "b"]  # a word folded to nothing takes no position
    assert words("ÆSIR straße") == ["æsir", "straße"]  # unicode61 folds no ligature


# --- on PostgreSQL ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg(pg_admin_url: str) -> Iterator[sa.Connection]:
    admin_url = sa.make_url(pg_admin_url)
    name = f"hermes_u61_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    engine = sa.create_engine(admin_url.set(database=name), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            for statement in postgres_vector_functions("u61"):
                connection.exec_driver_sql(statement)
            connection.exec_driver_sql(revision_module("0017").CREATE_PAIRS_FUNCTION)
            yield connection
    finally:
        engine.dispose()
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def _positions(text: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for position, word in enumerate(words(text), 1):
        out.setdefault(word, []).append(min(position, MAX_POSITION))
    return {word: sorted(set(places)) for word, places in out.items()}


def _server_positions(pg: sa.Connection, text: str) -> dict[str, list[int]]:
    rows = pg.execute(sa.text("SELECT lexeme, positions FROM unnest(u61(:doc))"), {"doc": text}).all()
    return {lexeme: sorted(positions or []) for lexeme, positions in rows}


@pytest.mark.postgres
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts)
def test_the_sql_tokenizer_gives_the_python_words_and_positions(pg: sa.Connection, text: str) -> None:
    assert _server_positions(pg, text) == _positions(text)


PAIRS_HELD = "hermes_word_pairs(v) @> ARRAY(SELECT hashtext(p) FROM unnest(CAST(:pairs AS text[])) AS p)"


def _adjacent_pairs(text: str) -> set[str]:
    """The pairs of words at adjacent positions, as the stored vector places them."""
    placed = [(position, word) for word, positions in _positions(text).items() for position in positions]
    at: dict[int, list[str]] = {}
    for position, word in placed:
        at.setdefault(position, []).append(word)
    return {f"{a} {b}" for position, firsts in at.items() for a in firsts for b in at.get(position + 1, [])}


def _server_pairs(pg: sa.Connection, text: str) -> set[int]:
    return set(pg.execute(sa.text("SELECT hermes_word_pairs(u61(:doc))"), {"doc": text}).scalar() or [])


def _hashes(pg: sa.Connection, pairs: set[str]) -> set[int]:
    sql = "SELECT array_agg(hashtext(p)) FROM unnest(CAST(:pairs AS text[])) AS p"
    return set(pg.execute(sa.text(sql), {"pairs": sorted(pairs)}).scalar() or [])


@pytest.mark.postgres
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts)
def test_the_word_pair_function_holds_the_adjacent_pairs_of_the_words(pg: sa.Connection, text: str) -> None:
    assert _server_pairs(pg, text) == _hashes(pg, _adjacent_pairs(text))


@pytest.mark.postgres
def test_word_pairs_past_the_last_position_pair_the_last_word_with_every_clamped_one(
    pg: sa.Connection,
) -> None:
    # Words past position 16,383 all stand at 16,383: the phrase operator finds the word at
    # 16,382 beside any of them, and so must the pairs.
    text = " ".join(f"w{i}" for i in range(16_400))
    expected = _adjacent_pairs(text)
    assert {"w16381 w16382", "w16381 w16399"} <= expected
    assert _server_pairs(pg, text) == _hashes(pg, expected)
    assert _server_pairs(pg, "") == set()


@pytest.mark.postgres
def test_the_sql_tokenizer_handles_quotes_backslashes_and_long_texts(pg: sa.Connection) -> None:
    text = "it's a back\\slash O'Brien " + " ".join(f"w{i % 300}" for i in range(20_000))
    # Positions past 16,383 all become 16,383, as tsvector stores them.
    assert _server_positions(pg, text) == _positions(text)
    assert pg.execute(sa.text("SELECT u61('')")).scalar() == ""


QUERY_WORDS = ["alpha", "beta", "gamma", "café", "Cafe", "my.app", "app", "config", "ts", "x1", "中文"]
QUERY_PARTS = [*QUERY_WORDS, "AND", "OR", "NOT", '"..."', '"alpha beta"', "al*", '"app config"*', "-", "b*"]


def _corpus(rng: random.Random) -> list[str]:
    vocabulary = [
        "alpha",
        "beta",
        "gamma",
        "café",
        "cafe",
        "my.app_config.ts",
        "app",
        "config",
        "x1",
        "中文",
        "ts",
    ]
    return [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 6))) for _ in range(300)]


@pytest.mark.postgres
def test_fts5_queries_find_on_postgresql_what_they_find_in_fts5(pg: sa.Connection) -> None:
    rng = random.Random(5)
    corpus = _corpus(rng)
    fts = Fts5()
    fts.tokenize_all(corpus)
    pg.exec_driver_sql("CREATE TEMP TABLE docs (id int PRIMARY KEY, v tsvector)")
    pg.execute(
        sa.text(
            "INSERT INTO docs SELECT n, u61(t) FROM unnest(CAST(:texts AS text[])) WITH ORDINALITY AS x(t, n)"
        ),
        {"texts": corpus},
    )
    checked = with_pairs = 0
    for _ in range(600):
        query = " ".join(rng.choice(QUERY_PARTS) for _ in range(rng.randint(1, 5)))
        match = sanitize_fts5_query(query)
        if not match:
            continue
        expected = fts.matches(match)
        tsquery = to_tsquery_text(match)
        found: set[int] = set()
        if tsquery is not None:
            rows = pg.execute(sa.text("SELECT id FROM docs WHERE v @@ CAST(:q AS tsquery)"), {"q": tsquery})
            found = {row[0] for row in rows}
        assert found == expected, (query, match, tsquery)
        pairs = required_word_pairs(match)
        if tsquery is not None and pairs:
            # Every match holds the pairs the query requires (revision 0017's index finds them).
            narrowed = pg.execute(
                sa.text(f"SELECT id FROM docs WHERE {PAIRS_HELD} AND v @@ CAST(:q AS tsquery)"),
                {"q": tsquery, "pairs": pairs},
            )
            assert {row[0] for row in narrowed} == found, (query, match, pairs)
            with_pairs += 1
        checked += 1
    assert checked > 500
    assert with_pairs > 100


def test_fts5_grammar_becomes_tsquery_text() -> None:
    # Implicit AND binds tighter than NOT, NOT than AND, AND than OR (fts5parse.y).
    assert to_tsquery_text("a NOT b c") == "('a' & !('b' & 'c'))"
    assert to_tsquery_text("a OR b AND c") == "('a' | ('b' & 'c'))"
    assert to_tsquery_text('"my.app"* Café') == "(('my' <-> 'app':*) & 'cafe')"
    # A term without words: dropped beside others, nothing as an operand.
    assert to_tsquery_text('foo "..."') == "'foo'"
    assert to_tsquery_text('foo OR "..."') == "'foo'"
    assert to_tsquery_text('foo NOT "..."') == "'foo'"
    assert to_tsquery_text('"..." AND foo') is None
    assert to_tsquery_text("OR") is None
    assert to_tsquery_text("it's") == "('it' <-> 's')"


def test_required_word_pairs_follow_the_query_grammar() -> None:
    assert required_word_pairs('"any does"') == ["any does"]
    assert required_word_pairs('"does does"') == ["does does"]
    assert required_word_pairs('"a b c" d') == ["a b", "b c"]
    assert required_word_pairs("my.app_config.ts") == ["app config", "config ts", "my app"]
    assert required_word_pairs('"Café Crème"') == ["cafe creme"]
    # A prefix word is not a lexeme; a single word has no pair.
    assert required_word_pairs('"a b c"*') == ["a b"]
    assert required_word_pairs('"a b"*') == []
    assert required_word_pairs("alpha beta") == []
    # OR keeps what both sides require; NOT nothing of its right side; AND all.
    assert required_word_pairs('"a b" OR "a b c"') == ["a b"]
    assert required_word_pairs('"a b" OR "c d"') == []
    assert required_word_pairs('"a b" NOT "c d"') == ["a b"]
    assert required_word_pairs('"a b" AND "c d"') == ["a b", "c d"]
    assert required_word_pairs('"..."') == []
