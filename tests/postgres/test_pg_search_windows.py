"""The id windows PostgreSQL searches read, newest first (``search/postgres/words.py`` and ``substrings.py``).

The windows are shrunk so a store of 400 messages holds several. Substring search narrowed
by CJK grams: the newest 16 ids (of which the newest 8 walked row by row, no index, when
the search asks for one gram), then 128 more when the first window's hit rate predicts
they fill the page, then the rest; the hits must be the brute-force answer (every message
holding every term, newest first, pages in order). Word search: slices of older and older
ids, the newest checked vector by vector, the next sized by the rate of matches so far;
whatever slices run, a caller asking for every hit gets exactly the brute-force set.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest
import sqlalchemy as sa
from pg_server import SharedDatabase

from hermes_store import SessionDB
from hermes_store.search.postgres import substrings as pg_substrings
from hermes_store.search.postgres import words as pg_words

pytestmark = pytest.mark.postgres

WALKED, FIRST, SECOND = 8, 16, 128
MESSAGES = 400


def _content(number: int) -> str:
    # "the sky 记忆" is common among the newest messages and rare among the oldest; "zork"
    # appears beside 记忆 only in three old messages.
    words = [f"w{number % 37}", "plain"]
    newest_sixty = number > MESSAGES - 60
    if (newest_sixty and number % 3 == 0) or (not newest_sixty and number % 50 == 0):
        words += ["the", "sky", "记忆"]
    if number in (40, 41, 170):
        words += ["zork", "记忆"]
    if number % 7 == 0:
        words.append("记")  # one character of the pair alone: never a hit
    if number % 5 == 0:
        words.append("服务器")  # three CJK characters: one pg_trgm trigram
    return " ".join(words)


def _fill(url: str) -> None:
    db = SessionDB(url=url)
    db.create_session("s", "cli")
    db.append_messages("s", [{"role": "user", "content": _content(n)} for n in range(1, MESSAGES + 1)])
    db.close()


@pytest.fixture(scope="module")
def store(shared_pg_database: SharedDatabase) -> Iterator[SessionDB]:
    """The store, built once per test run (the tests only read it; xdist may spread them)."""
    db = SessionDB(url=shared_pg_database("windows", _fill))
    yield db
    db.close()


@pytest.fixture
def small_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg_substrings, "WALKED_SUBSTRING_WINDOW", WALKED)
    monkeypatch.setattr(pg_substrings, "FIRST_SUBSTRING_WINDOW", FIRST)
    monkeypatch.setattr(pg_substrings, "SECOND_SUBSTRING_WINDOW", SECOND)


def _expected(store: SessionDB, *terms: str) -> list[int]:
    with store.engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT id, content FROM messages ORDER BY id DESC")).all()
    return [row_id for row_id, content in rows if all(term in content for term in terms)]


class Read(NamedTuple):
    """What one ``search_messages`` call returned and which id windows it read."""

    hits: list[int]
    windows: list[tuple[int, int]]
    """(floor, ceiling) of each window, in the order read."""
    checked: list[bool]
    """Per window: its vectors checked one by one (the ``COALESCE`` form no index serves),
    without the word-pair index (revision 0017) finding candidates first."""
    paired: list[bool]
    """Per window: its candidates found in the word-pair index, then checked."""
    walked: list[bool]
    """Per substring window: its rows walked newest first, the stored grams checked on each
    (the ``COALESCE`` form no index serves)."""


def _read(store: SessionDB, query: str, **kwargs: Any) -> Read:
    read = Read([], [], [], [], [])

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "WITH hits AS" in statement or "ts_rank" in statement:
            read.windows.append((parameters["floor"], parameters["ceiling"]))
            paired = "hermes_word_pairs(" in statement
            read.checked.append("COALESCE(m.search_vector" in statement and not paired)
            read.paired.append(paired)
            read.walked.append("COALESCE(m.cjk_grams" in statement)

    sa.event.listen(store.engine, "before_cursor_execute", record)
    try:
        read.hits.extend(hit["id"] for hit in store.search_messages(query, **kwargs))
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", record)
    return read


def test_a_common_pair_is_found_in_the_second_window_without_reading_the_rest(
    store: SessionDB, small_windows: None
) -> None:
    expected = _expected(store, "the", "记忆")
    read = _read(store, "the 记忆", limit=20)
    assert read.hits == expected[:20]
    newest = max(_expected(store, "plain"))
    # 5 hits among the 16 newest ids predict 40 in the next 128: enough for the other 15.
    assert read.windows == [(newest - FIRST, newest), (newest - FIRST - SECOND, newest - FIRST)]
    # Two grams (记忆, and the trigram of "the"): GIN intersects them, nothing is walked.
    assert read.walked == [False, False]


def test_a_rare_pair_goes_from_the_first_window_to_the_rest(store: SessionDB, small_windows: None) -> None:
    hits, windows, *_ = _read(store, "zork 记忆", limit=20)
    assert hits == _expected(store, "zork", "记忆") == [170, 41, 40]
    newest = max(_expected(store, "plain"))
    assert windows == [(newest - FIRST, newest), (0, newest - FIRST)]


def test_a_page_the_newest_rows_fill_is_walked_without_the_gram_index(
    store: SessionDB, small_windows: None
) -> None:
    expected = _expected(store, "记忆")
    newest = max(_expected(store, "plain"))
    # One gram: the 8 newest ids are walked first, and their 3 hits fill a page of 2.
    read = _read(store, "记忆", limit=2)
    assert read.hits == expected[:2]
    assert read.windows == [(newest - WALKED, newest)] and read.walked == [True]
    # A page of 20: the rest of the first window through the index (5 hits in 16 ids),
    # then the second window, which that rate predicts holds the other 15.
    read = _read(store, "记忆", limit=20)
    assert read.hits == expected[:20]
    assert read.windows == [
        (newest - WALKED, newest),
        (newest - FIRST, newest - WALKED),
        (newest - FIRST - SECOND, newest - FIRST),
    ]
    assert read.walked == [True, False, False]
    # A single character is one gram too; three CJK characters are one pg_trgm trigram,
    # walked with their two stored pairs.
    assert _read(store, "记", limit=1).walked == [True]
    read = _read(store, "服务器", limit=1)
    assert read.hits == _expected(store, "服务器")[:1] and read.walked == [True]
    read = _read(store, "服务器", limit=20)
    assert read.hits == _expected(store, "服务器")[:20] and read.walked[0] and not any(read.walked[1:])


def test_a_page_the_second_window_cannot_fill_is_completed_from_the_rest(
    store: SessionDB, small_windows: None
) -> None:
    expected = _expected(store, "the", "记忆")
    newest = max(_expected(store, "plain"))
    first = [(newest - FIRST, newest)]
    # 5 hits in the first window predict 40 more in the second: enough for a page of 38,
    # so the second runs, and the rest of the store completes what it did not hold.
    hits, windows, *_ = _read(store, "the 记忆", limit=38)
    assert hits == expected[:38]
    assert windows == [*first, (newest - FIRST - SECOND, newest - FIRST), (0, newest - FIRST - SECOND)]
    # Not enough for a page of 50: straight to the rest.
    hits, windows, *_ = _read(store, "the 记忆", limit=50)
    assert hits == expected
    assert windows == [*first, (0, newest - FIRST)]


@pytest.mark.parametrize(
    "query", ["the 记忆", "记忆", "记", "zork 记忆", "plain 记忆", "服务器", "服务器 plain"]
)
def test_pages_of_every_size_and_offset_are_the_brute_force_answer(
    store: SessionDB, small_windows: None, query: str
) -> None:
    expected = _expected(store, *query.split())
    for limit in (1, 5, 20, 50):
        for offset in (0, 3, 17, 40):
            hits, *_ = _read(store, query, limit=limit, offset=offset)
            assert hits == expected[offset : offset + limit], (limit, offset)


# --- word search ---------------------------------------------------------------------------


@pytest.fixture
def small_word_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg_words, "FIRST_WORD_WINDOW", FIRST)
    # Scaled to the 400 messages: a phrase predicted to hold 20 or fewer looks up every
    # older id at once, one of the "plain the" rate (about 125) widens slice by slice.
    monkeypatch.setattr(pg_words, "FEW_PAIRED_CANDIDATES", 20)


def _word_expected(store: SessionDB, query: str) -> set[int]:
    """Brute force over the stored texts: every word, a phrase, a prefix, an OR."""
    with store.engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT id, content FROM messages")).all()
    found = set()
    for row_id, content in rows:
        tokens = content.split()
        if query.startswith('"'):
            phrase = query.strip('"').split()
            hit = any(tokens[i : i + len(phrase)] == phrase for i in range(len(tokens)))
        elif query.endswith("*"):
            hit = any(token.startswith(query[:-1]) for token in tokens)
        elif " OR " in query:
            hit = any(word in tokens for word in query.split(" OR "))
        else:
            hit = all(word in tokens for word in query.split())
        if hit:
            found.add(row_id)
    return found


@pytest.mark.parametrize(
    "query", ["plain", "zork", '"plain the"', "w1*", "w3 OR zork", "the plain", "nothing"]
)
@pytest.mark.parametrize("limit", [5, 20, 1000])
def test_word_slices_are_disjoint_and_a_large_limit_gets_every_hit(
    store: SessionDB, small_word_windows: None, query: str, limit: int
) -> None:
    expected = _word_expected(store, query)
    hits, windows, *_ = _read(store, query, limit=limit)
    assert len(hits) == len(set(hits)) == min(limit, len(expected))
    assert set(hits) <= expected
    if limit >= len(expected):
        assert set(hits) == expected
    newest = max(_expected(store, "plain"))
    # Each slice starts where the last ended, the newest first; the last reaches the
    # oldest message unless the page was full.
    assert windows[0][1] == newest
    assert all(older[1] == newer[0] for newer, older in itertools.pairwise(windows))
    if len(hits) < limit:
        assert windows[-1][0] <= 0


def test_a_common_word_is_answered_from_the_newest_slice_checked_one_by_one(
    store: SessionDB, small_word_windows: None
) -> None:
    newest = max(_expected(store, "plain"))
    hits, windows, checked, *_ = _read(store, "plain", limit=10)
    assert hits == list(range(newest, newest - 10, -1))  # equal scores: newest first
    assert windows == [(newest - FIRST, newest)]
    assert checked == [True]


def test_a_rare_word_widens_eightfold_and_is_looked_up_in_the_index(
    store: SessionDB, small_word_windows: None
) -> None:
    newest = max(_expected(store, "plain"))
    hits, windows, checked, *_ = _read(store, "zork", limit=20)
    assert sorted(hits) == [40, 41, 170]
    assert windows == [(newest - 16, newest), (newest - 128, newest - 16), (newest - 1024, newest - 128)]
    # Nothing in the newest slice: the query is rare, the index finds the rest.
    assert checked == [True, False, False]


@pytest.mark.parametrize("query", ['"plain the"', "the plain"])
def test_slices_after_matches_are_sized_by_their_rate(
    store: SessionDB, small_word_windows: None, query: str
) -> None:
    newest = max(_expected(store, "plain"))
    hits, windows, checked, paired, _ = _read(store, query, limit=12)
    assert len(hits) == 12
    # 5 of the 16 newest ids match: 12 wanted, half as much again, at that rate: 57 ids.
    assert windows == [(newest - 16, newest), (newest - 57, newest - 16)]
    assert checked == [True, False]
    # The older slice of a phrase finds its candidates by the phrase's word pair.
    assert paired == [False, query.startswith('"')]


def test_a_phrase_of_two_pairs_walks_a_slice_its_candidates_would_cost_more(
    store: SessionDB, small_word_windows: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = '"plain the sky"'
    # The same rate as above (about 125 candidates in the store, each row read, since the
    # planner does not intersect two pairs' candidates with the slice): walking the
    # slice's 41 rows costs less.
    read = _read(store, query, limit=12)
    assert read.checked == [True, True] and read.paired == [False, False]
    assert set(read.hits) <= _word_expected(store, query) and len(read.hits) == 12
    # Were a walked row costlier, the pairs would find the candidates.
    monkeypatch.setattr(pg_words, "WALKED_ROW_COST_BESIDE_PAIRS", 17)
    read = _read(store, query, limit=12)
    assert read.checked == [True, False] and read.paired == [False, True]
    assert set(read.hits) <= _word_expected(store, query) and len(read.hits) == 12


@pytest.mark.parametrize("query", ['"plain the"', "the plain"])
def test_an_older_slice_is_walked_when_its_posting_lists_would_cost_more(
    store: SessionDB, small_word_windows: None, monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    # 5 matches among the 16 newest ids: at that rate the index would hand over about 125
    # entries for the whole store, against 41 rows to walk in the next slice. With a row
    # costing as much as 2 entries (82 < 125) the slice is walked; at 17 (697) it is not.
    monkeypatch.setattr(pg_words, "WALKED_ROW_COST", 2)
    monkeypatch.setattr(pg_words, "WALKED_ROW_COST_BESIDE_PAIRS", 2)
    newest = max(_expected(store, "plain"))
    read = _read(store, query, limit=12)
    assert set(read.hits) <= _word_expected(store, query) and len(read.hits) == 12
    assert read.windows == [(newest - 16, newest), (newest - 57, newest - 16)]
    assert read.checked == [True, True] and read.paired == [False, False]
    # Every hit is still found, whichever way each slice is read.
    assert set(_read(store, query, limit=1000).hits) == _word_expected(store, query)


def test_a_rare_phrase_looks_up_every_older_id_at_once(store: SessionDB, small_word_windows: None) -> None:
    newest = max(_expected(store, "plain"))
    read = _read(store, '"plain zork"', limit=20)
    assert set(read.hits) == _word_expected(store, '"plain zork"') == {40, 41, 170}
    # Nothing among the newest 16 ids predicts few candidates in the store: one lookup by
    # the pair over every older id, instead of slices widening eightfold.
    assert read.windows == [(newest - 16, newest), (0, newest - 16)]
    assert read.paired == [False, True]


# --- windows split by id bucket (revision 0018) ---------------------------------------------

BUCKET_BITS = 5  # 32 ids a bucket: the 400 messages reach 13 buckets


@pytest.fixture
def small_buckets(monkeypatch: pytest.MonkeyPatch) -> None:
    # The index keys 18 bits; arms of 5 name buckets no index holds, so they run as filters:
    # what this checks is which ids each window reads, and that the hits stay exact.
    from hermes_store.search import id_buckets

    monkeypatch.setattr(id_buckets, "ID_BUCKET_BITS", BUCKET_BITS)
    monkeypatch.setattr(pg_words, "ID_BUCKET_BITS", BUCKET_BITS)
    monkeypatch.setattr(pg_substrings, "ID_BUCKET_BITS", BUCKET_BITS)


def _statements(store: SessionDB, query: str, **kwargs: Any) -> tuple[list[int], list[str]]:
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    sa.event.listen(store.engine, "before_cursor_execute", record)
    try:
        hits = [int(hit["id"]) for hit in store.search_messages(query, **kwargs)]
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", record)
    return hits, statements


def test_a_rare_pair_reads_older_ids_a_bucket_then_two_four_and_eight_at_a_time(
    store: SessionDB, small_windows: None, small_buckets: None
) -> None:
    read = _read(store, "zork 记忆", limit=20)
    assert read.hits == [170, 41, 40]
    newest = max(_expected(store, "plain"))
    width = 1 << BUCKET_BITS
    floor = newest - FIRST
    expected = [(floor, newest)]
    # Less than half a bucket below the first window (384 starts bucket 12): two buckets
    # first, then four, then eight.
    assert floor % width < width // 2
    counts = []
    for buckets in (2, 4, 8):
        lowest = (floor >> BUCKET_BITS) - buckets + 1
        expected.append((max(lowest * width - 1, 0), floor))
        counts.append(buckets if lowest > 0 else 0)
        floor = expected[-1][0]
        if floor == 0:
            break
    # The 400 ids end inside those windows; a larger store reads what is older than
    # fifteen buckets in one statement, as before.
    assert read.windows == expected
    _, statements = _statements(store, "zork 记忆", limit=20)
    arms = [sql.count(f"(m.id >> {BUCKET_BITS}) = CAST(") for sql in statements if "WITH hits AS" in sql]
    # The last window reaches the oldest id: read in one statement, not split.
    assert arms[1:] == counts == [2, 4, 0]


def test_the_chain_starts_with_one_bucket_when_half_of_it_lies_below(
    store: SessionDB, small_windows: None, small_buckets: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    newest = max(_expected(store, "plain"))
    # floor 383: bucket 11's last id
    monkeypatch.setattr(pg_substrings, "FIRST_SUBSTRING_WINDOW", newest - 383)
    read = _read(store, "zork 记忆", limit=20)
    assert read.hits == [170, 41, 40]
    assert read.windows[1] == (351, 383)  # bucket 11 alone


def test_a_three_character_cjk_term_is_looked_up_by_its_grams_once_the_store_is_split(
    store: SessionDB, small_windows: None, small_buckets: None
) -> None:
    # Past the walk, 服务器's windows ask the bucketed gram index for 服务 and 务器 (pg_trgm,
    # which has no bucket, would read its trigram's whole posting list).
    hits, statements = _statements(store, "服务器", limit=60)
    assert hits == _expected(store, "服务器")[:60]
    windows = [sql for sql in statements if "WITH hits AS" in sql]
    assert len(windows) > 1 and all("cjk_grams" in sql for sql in windows)
    assert any(f"(m.id >> {BUCKET_BITS}) = CAST(" in sql for sql in windows[1:])


def test_a_word_slice_is_looked_up_one_arm_per_bucket(
    store: SessionDB, small_word_windows: None, small_buckets: None
) -> None:
    hits, statements = _statements(store, "zork", limit=20)
    assert sorted(hits) == [40, 41, 170]
    ranked = [sql for sql in statements if "ts_rank" in sql]
    assert any("UNION ALL" in sql for sql in ranked[1:])
    assert "UNION ALL" not in ranked[0]  # the newest slice is checked row by row


@pytest.mark.parametrize(
    "query",
    ["the 记忆", "记忆", "zork 记忆", "plain 记忆", "服务器", "服务器 plain", "plain", '"plain the"', "w1*"],
)
def test_pages_split_by_bucket_are_the_brute_force_answer(
    store: SessionDB, small_windows: None, small_word_windows: None, small_buckets: None, query: str
) -> None:
    if all(ord(char) < 128 for char in query):
        expected = _word_expected(store, query)
        assert set(_read(store, query, limit=1000).hits) == expected
        return
    expected_ids = _expected(store, *query.split())
    for limit in (1, 5, 20, 50):
        for offset in (0, 3, 17, 40):
            hits, *_ = _read(store, query, limit=limit, offset=offset)
            assert hits == expected_ids[offset : offset + limit], (limit, offset)
