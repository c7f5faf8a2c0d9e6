"""The id windows of a PostgreSQL substring search narrowed by CJK grams (``search/postgres.py``).

The windows are shrunk (16 newest ids, then 128) so a store of 400 messages holds all
three: the newest window, the second one the first window's hit rate asks for, and the
rest of the store. Whatever windows run, the hits must be the brute-force answer (every
message holding every term, newest first, pages in order), and the second window must run
exactly when the first predicts that it fills the page.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from hermes_store import SessionDB
from hermes_store.search import postgres as pg_search

pytestmark = pytest.mark.postgres

FIRST, SECOND = 16, 128
MESSAGES = 400


def _content(number: int) -> str:
    # "the 记忆" is common among the newest messages and rare among the oldest; "zork"
    # appears beside 记忆 only in three old messages.
    words = [f"w{number % 37}", "plain"]
    newest_sixty = number > MESSAGES - 60
    if (newest_sixty and number % 3 == 0) or (not newest_sixty and number % 50 == 0):
        words += ["the", "记忆"]
    if number in (40, 41, 170):
        words += ["zork", "记忆"]
    if number % 7 == 0:
        words.append("记")  # one character of the pair alone: never a hit
    return " ".join(words)


@pytest.fixture(scope="module")
def store(pg_admin_url: str) -> Iterator[SessionDB]:
    from pg_server import scratch_database

    with scratch_database(pg_admin_url, "hermes_windows", wait_for_wal_flush=False) as url:
        db = SessionDB(url=url)
        db.create_session("s", "cli")
        db.append_messages("s", [{"role": "user", "content": _content(n)} for n in range(1, MESSAGES + 1)])
        yield db
        db.close()


@pytest.fixture
def small_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg_search, "FIRST_SUBSTRING_WINDOW", FIRST)
    monkeypatch.setattr(pg_search, "SECOND_SUBSTRING_WINDOW", SECOND)


def _expected(store: SessionDB, *terms: str) -> list[int]:
    with store.engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT id, content FROM messages ORDER BY id DESC")).all()
    return [row_id for row_id, content in rows if all(term in content for term in terms)]


def _windows_read(store: SessionDB, query: str, **kwargs: Any) -> tuple[list[int], list[tuple[int, int]]]:
    """The hit ids of ``search_messages(query)`` and the (floor, ceiling) of each window it read."""
    windows: list[tuple[int, int]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "WITH hits AS" in statement:
            windows.append((parameters["floor"], parameters["ceiling"]))

    sa.event.listen(store.engine, "before_cursor_execute", record)
    try:
        hits = store.search_messages(query, **kwargs)
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", record)
    return [hit["id"] for hit in hits], windows


def test_a_common_pair_is_found_in_the_second_window_without_reading_the_rest(
    store: SessionDB, small_windows: None
) -> None:
    expected = _expected(store, "the", "记忆")
    hits, windows = _windows_read(store, "the 记忆", limit=20)
    assert hits == expected[:20]
    newest = max(_expected(store, "plain"))
    # 5 hits among the 16 newest ids predict 40 in the next 128: enough for the other 15.
    assert windows == [(newest - FIRST, newest), (newest - FIRST - SECOND, newest - FIRST)]


def test_a_rare_pair_goes_from_the_first_window_to_the_rest(store: SessionDB, small_windows: None) -> None:
    hits, windows = _windows_read(store, "zork 记忆", limit=20)
    assert hits == _expected(store, "zork", "记忆") == [170, 41, 40]
    newest = max(_expected(store, "plain"))
    assert windows == [(newest - FIRST, newest), (0, newest - FIRST)]


def test_a_page_the_second_window_cannot_fill_is_completed_from_the_rest(
    store: SessionDB, small_windows: None
) -> None:
    expected = _expected(store, "the", "记忆")
    newest = max(_expected(store, "plain"))
    first = (newest - FIRST, newest)
    # 5 hits in the first window predict 40 more in the second: enough for a page of 38,
    # so the second runs, and the rest of the store completes what it did not hold.
    hits, windows = _windows_read(store, "the 记忆", limit=38)
    assert hits == expected[:38]
    assert windows == [first, (newest - FIRST - SECOND, newest - FIRST), (0, newest - FIRST - SECOND)]
    # Not enough for a page of 50: straight to the rest.
    hits, windows = _windows_read(store, "the 记忆", limit=50)
    assert hits == expected
    assert windows == [first, (0, newest - FIRST)]


@pytest.mark.parametrize("query", ["the 记忆", "记忆", "记", "zork 记忆", "plain 记忆"])
def test_pages_of_every_size_and_offset_are_the_brute_force_answer(
    store: SessionDB, small_windows: None, query: str
) -> None:
    expected = _expected(store, *query.split())
    for limit in (1, 5, 20, 50):
        for offset in (0, 3, 17, 40):
            hits, _ = _windows_read(store, query, limit=limit, offset=offset)
            assert hits == expected[offset : offset + limit], (limit, offset)
