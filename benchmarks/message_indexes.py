"""What each secondary index of ``messages`` costs and who reads it, on a loaded PostgreSQL store.

Used by :mod:`benchmarks.bench_copy` (``--index-costs N``) on the database its bare load
has just filled, so the figures are those of the same rows:

* :func:`append_costs` — the WAL each relation of ``messages`` gets when ``N`` messages
  are appended: the records between ``pg_current_wal_insert_lsn()`` before and after,
  read back with ``pg_walinspect`` and summed by the relation each names (the heap, its
  TOAST, each index), record bytes and full-page-image bytes apart. Record bytes depend
  neither on the machine's load nor on when the last checkpoint was. The appended
  messages are copies of the newest ``N``, added to the same (newest) sessions, as an
  agent's turns arrive; every GIN pending list is emptied first and merged into its
  index (``gin_clean_pending_list``) inside the measurement, so a GIN index's cost
  includes the merge every insert eventually pays. Also the time of an append with
  every index and with none (dropped in a transaction that is rolled back).
* :func:`index_readers` — the index names in the plans of the statements the store
  sends for each public call (captured as the store sends them, then ``EXPLAIN``\\ ed
  with the same parameters on the same connection).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

_SECONDARY = """
    SELECT c.relname, am.amname FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
    WHERE i.indrelid = 'messages'::regclass AND NOT i.indisunique AND NOT i.indisprimary
    ORDER BY c.relname
"""
_APPEND = """
    INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name,
                          timestamp, token_count, finish_reason, reasoning)
    SELECT session_id, role, content, tool_call_id, tool_calls, tool_name,
           timestamp + 1e6, token_count, finish_reason, reasoning
    FROM messages WHERE id > (SELECT max(id) FROM messages) - %s ORDER BY id
"""


def _secondary(connection: Any) -> dict[str, str]:
    return {str(name): str(kind) for name, kind in connection.execute(_SECONDARY)}


def _clean_pending_lists(connection: Any) -> None:
    """Merge every GIN index's pending list into the index (committed)."""
    for name, kind in _secondary(connection).items():
        if kind == "gin":
            connection.execute("SELECT gin_clean_pending_list(%s::regclass)", (name,))
    connection.commit()


def _flushed_past(connection: Any, lsn: Any, timeout_s: float = 30.0) -> None:
    """Wait until the server has flushed its WAL past ``lsn`` (``pg_walinspect`` reads
    only flushed WAL; the WAL writer flushes a rolled-back transaction's within 200 ms)."""
    deadline = time.monotonic() + timeout_s
    while not connection.execute("SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:
        connection.rollback()
        if time.monotonic() > deadline:
            raise TimeoutError(f"the WAL was not flushed past {lsn} in {timeout_s} s")
        time.sleep(0.05)
    connection.rollback()


_BY_RELATION = r"""
    SELECT substring(block_ref from 'rel \d+/\d+/(\d+)'), sum(record_length - fpi_length), sum(fpi_length)
    FROM pg_get_wal_records_info(%s, %s) GROUP BY 1
"""
_RELATIONS = """
    SELECT c.relfilenode::text, CASE WHEN c.relnamespace = 'pg_toast'::regnamespace THEN 'TOAST'
                                     ELSE c.relname END
    FROM pg_class c WHERE c.relfilenode <> 0
"""


def _one_append(connection: Any, count: int) -> tuple[dict[str, tuple[int, int]], float]:
    """Append ``count`` messages (committed), merge the GIN pending lists; the WAL each
    relation got — record bytes without full-page images, and full-page image bytes —
    and the seconds taken."""
    _clean_pending_lists(connection)  # every round starts from empty pending lists
    lsn = "SELECT pg_current_wal_insert_lsn()"
    before = connection.execute(lsn).fetchone()[0]
    started = time.perf_counter()
    connection.execute(_APPEND, (count,))
    _clean_pending_lists(connection)
    seconds = time.perf_counter() - started
    after = connection.execute(lsn).fetchone()[0]
    connection.rollback()
    _flushed_past(connection, after)
    names = dict(connection.execute(_RELATIONS).fetchall())
    per_relation: dict[str, tuple[int, int]] = {}
    for node, records, images in connection.execute(_BY_RELATION, (before, after)):
        name = (
            names.get(node, "other (commit records, catalog)") if node else "other (commit records, catalog)"
        )
        was = per_relation.get(name, (0, 0))
        per_relation[name] = (was[0] + int(records or 0), was[1] + int(images or 0))
    connection.rollback()
    return per_relation, seconds


def _bare_append_seconds(connection: Any, count: int, names: list[str]) -> float:
    """Seconds to append ``count`` messages with no secondary index (dropped, rolled back)."""
    try:
        for name in names:
            connection.execute(f"DROP INDEX {name}")
        started = time.perf_counter()
        connection.execute(_APPEND, (count,))
        return time.perf_counter() - started
    finally:
        connection.rollback()


def append_costs(conninfo: str, count: int, rounds: int = 3) -> dict[str, Any]:
    """Per appended message: the WAL each relation of ``messages`` (heap, TOAST, each
    index) gets, medians of ``rounds`` appends of ``count`` messages, read back with
    ``pg_walinspect`` by the relation each record names; and the µs of an append with
    every index and with none. Record bytes depend neither on the load nor on when the
    last checkpoint was; full-page images (the first change to a page after a
    checkpoint logs the whole page) and times do."""
    import psycopg

    with psycopg.connect(conninfo) as connection:
        connection.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        connection.commit()
        names = list(_secondary(connection))
        connection.rollback()
        _one_append(connection, count)  # warm-up: caches
        samples = [_one_append(connection, count) for _ in range(rounds)]
        bare = [_bare_append_seconds(connection, count, names) for _ in range(rounds)]
    relations = sorted({name for per_relation, _ in samples for name in per_relation})
    return {
        "relations": {
            name: {
                "wal_bytes_per_message": statistics.median(r.get(name, (0, 0))[0] for r, _ in samples)
                / count,
                "fpi_bytes_per_message": statistics.median(r.get(name, (0, 0))[1] for r, _ in samples)
                / count,
            }
            for name in relations
        },
        "us_per_message_every_index": statistics.median(seconds for _, seconds in samples) * 1e6 / count,
        "us_per_message_no_secondary_index": statistics.median(bare) * 1e6 / count,
    }


@contextmanager
def _captured(engine: sa.Engine) -> Iterator[list[tuple[str, Any]]]:
    """The driver statements (and parameters) ``engine`` sends while inside."""
    seen: list[tuple[str, Any]] = []

    def note(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        if not many and statement.lstrip().upper().startswith(("SELECT", "WITH", "DELETE", "UPDATE")):
            seen.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", note)


def _plan_indexes(conninfo: str, statements: list[tuple[str, Any]]) -> set[str]:
    """The ``idx_messages_*`` names in the plans of ``statements`` (rolled back)."""
    import psycopg

    found: set[str] = set()
    with psycopg.connect(conninfo) as connection:
        for statement, parameters in statements:
            try:
                plan = connection.execute("EXPLAIN " + statement, parameters or None).fetchall()
            except psycopg.Error:
                connection.rollback()
                continue
            text = "\n".join(str(row[0]) for row in plan)
            found.update(word for word in text.replace("(", " ").split() if word.startswith("idx_messages_"))
            connection.rollback()
    return found


def index_readers(url: str, calls: dict[str, Callable[[Any], object]]) -> dict[str, list[str]]:
    """For each named call on a ``SessionDB`` of ``url``: the message indexes its plans read."""
    from hermes_store import SessionDB

    conninfo = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    db = SessionDB(url=url)
    readers: dict[str, list[str]] = {}
    try:
        engine = db.engine
        for name, call in calls.items():
            with _captured(engine) as statements:
                call(db)
            readers[name] = sorted(_plan_indexes(conninfo, statements))
    finally:
        db.close()
    return readers


_CJK_RUN = "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]{3,}"


def standard_calls(url: str) -> dict[str, Callable[[Any], object]]:
    """The store's public calls that read ``messages``, with arguments taken from the
    loaded rows: the newest session, a word and a phrase of a message, CJK terms of three
    and of two characters. Deleting a session goes last (it removes the session)."""
    import re

    from hermes_store.admin.copy_verify import sample_words
    from hermes_store.db.engine import create_engine

    engine = create_engine(url, prepare=False)
    try:
        with engine.connect() as connection:
            session_id, newest = connection.exec_driver_sql(
                "SELECT session_id, id FROM messages ORDER BY id DESC LIMIT 1"
            ).one()
            cjk_text = connection.exec_driver_sql(
                "SELECT content FROM messages WHERE cjk_grams IS NOT NULL ORDER BY id DESC LIMIT 1"
            ).scalar_one()
        words = [word for word, _ in sample_words(engine, 2)]
    finally:
        engine.dispose()
    run = re.search(_CJK_RUN, str(cjk_text))
    cjk = run.group(0) if run else "数据库"
    return {
        "search_messages(word)": lambda db: db.search_messages(words[0]),
        "search_messages(phrase)": lambda db: db.search_messages(f'"{" ".join(words)}"'),
        "search_messages(CJK, 3 characters)": lambda db: db.search_messages(cjk[:3]),
        "search_messages(CJK, 2 characters)": lambda db: db.search_messages(cjk[:2]),
        "get_messages": lambda db: db.get_messages(session_id),
        "get_messages_as_conversation": lambda db: db.get_messages_as_conversation(session_id),
        "get_messages_around": lambda db: db.get_messages_around(session_id, int(newest) - 3),
        "has_platform_message_id": lambda db: db.has_platform_message_id(session_id, "p-1"),
        "list_sessions_rich": lambda db: db.list_sessions_rich(limit=20),
        "delete_session": lambda db: db.delete_session(session_id),
    }
