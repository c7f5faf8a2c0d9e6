"""Fixtures of the SessionDB behavioural suite.

Every test gets a real SQLite file in its own ``tmp_path``. Where a test needs a value
the API sets from the clock (``started_at``, ``ended_at``, message timestamps) it
rewrites that value afterwards through ``db._conn`` (a raw autocommit connection to the
same file) with the ``raw`` fixture, so expected values are literals, never timings.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from async_proxy import BlockingAsyncSessionDB, LoopThread
from sqlalchemy import make_url as sa_make_url
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine
from support import pg_store_emptier

from hermes_store import SessionDB, create_engine


@pytest.fixture(scope="session")
def fresh_db_image(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of a database SessionDB has just created (once per test run).

    Creating a store runs the whole migration history, which costs far more than the
    tests that use it; copying a file the same code created moments ago gives every test
    an identical, brand-new database for the price of a file write. Tests about creating
    a database (permissions, schema, paths) open their own files instead.
    """
    path = tmp_path_factory.mktemp("template") / "state.db"
    SessionDB(path).close()
    assert not Path(f"{path}-wal").exists(), "closing must checkpoint the WAL into the file"
    return path.read_bytes()


BACKENDS = ["sqlite", "postgresql"]
# Modules about the SQLite file itself (its bytes, upstream's sqlite3 reader/writer).
SQLITE_ONLY_MODULES = {"test_file_compat.py"}


@pytest.fixture(scope="session")
def pg_store_url(pg_admin_url: str, pg_head_template: str) -> Iterator[str]:
    """One fresh PostgreSQL database at head for this process (tables emptied per test): a
    copy of the run's ``pg_head_template`` rather than every migration run again.

    Each xdist worker is its own process, so each gets its own database: workers never
    see each other's rows.
    """
    from pg_server import scratch_database

    with scratch_database(
        pg_admin_url, prefix="hermes_suite", wait_for_wal_flush=False, template=pg_head_template
    ) as url:
        yield url


@pytest.fixture(scope="session")
def pg_emptier(pg_store_url: str) -> Iterator[Callable[[], None]]:
    """Empties the worker's PostgreSQL store (one connection for the whole run)."""
    with pg_store_emptier(pg_store_url) as empty:
        yield empty


@pytest.fixture(scope="session")
def pg_shared_engine(pg_store_url: str) -> Iterator[Engine]:
    """One engine for the worker's sync PostgreSQL stores (``SessionDB(engine=…)``).

    A store that opens its URL builds an engine and two new server sessions, about 24 ms
    of a PostgreSQL test's 30 (most of it the server starting backends and warming their
    caches); an injected engine keeps its pool across stores, as a service's does. The
    modules that attach listeners or instrumentation to ``db.engine``
    (:data:`OWN_ENGINE_MODULES`) still open the URL, and so do the tests under
    ``tests/postgres``.
    """
    engine = create_engine(pg_store_url)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def pg_shared_async(pg_store_url: str) -> Iterator[tuple[LoopThread, AsyncEngine]]:
    """The same for the async PostgreSQL stores: one event loop thread and one
    ``AsyncEngine`` on it (an asyncio connection belongs to the loop that opened it)."""
    from hermes_store.aio import create_async_engine

    runner = LoopThread()
    engine = create_async_engine(async_test_url(pg_store_url))
    try:
        yield runner, engine
    finally:
        runner.run(engine.dispose())
        runner.stop()


OWN_ENGINE_MODULES = {"test_observability.py", "test_tracing_and_errors.py"}


PSYCOPG_INTEGRITY = "the driver's IntegrityError is psycopg's, not sqlite3's"
# Behaviours that legitimately differ on PostgreSQL, each listed in docs/postgresql.md.
POSTGRES_DIFFERENCES = {
    "test_create_session_with_missing_parent_raises_integrity_error": PSYCOPG_INTEGRITY,
    "test_ensure_session_with_missing_parent_raises_integrity_error": PSYCOPG_INTEGRITY,
    "test_append_to_missing_session_raises_integrity_error": PSYCOPG_INTEGRITY,
    "test_replace_messages_for_missing_session_raises_integrity_error": PSYCOPG_INTEGRITY,
    "test_busy_timeout_is_one_second": "SQLite pragma",
    "test_foreign_keys_and_wal_are_on": "SQLite pragmas",
    "test_list_content_is_stored_behind_the_sentinel": "the sentinel is stored as U+E000 on PostgreSQL",
    "test_dict_content_round_trips": "checks the stored SQLite sentinel byte for byte",
    "test_bytes_content_reads_back_as_bytes": "PostgreSQL text cannot hold bytes (TypeError)",
    "test_vacuum_reclaims_free_pages_after_a_large_delete": "SQLite page counts",
    "test_word_search": "ts_headline snippets differ from FTS5 snippet()",
    "test_tool_name_is_searchable": "ts_headline snippets differ from FTS5 snippet()",
    "test_both_indexes_hold_exactly_the_live_messages": "reads the FTS5 tables",
    "test_indexed_text_is_content_tool_name_and_tool_calls": "reads the FTS5 tables",
    "test_prune_a_long_chain_of_many_sessions": "arranges rows with sqlite3's executemany",
}


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend this test runs on; SQLite-only behaviour skips PostgreSQL, with the reason."""
    name = str(request.param)
    if name == "postgresql":
        if request.path.name in SQLITE_ONLY_MODULES:
            pytest.skip("about the SQLite file format itself")
        difference = POSTGRES_DIFFERENCES.get(request.node.originalname)
        if difference:
            pytest.skip(f"differs on PostgreSQL by design: {difference}")
    return name


APIS = ["sync", "async"]

# The asyncio API on PostgreSQL runs its own unit of work (async_unit_of_work.py) for
# writes; its reads run the same statements as the sync API's, through an asyncio
# connection. So on PostgreSQL the async variant runs the modules that write (and the
# observability matrix, which checks that every method's statements reach the engine's
# events); the read-only modules run it on SQLite and sync on PostgreSQL, and
# tests/aio/test_aio_api.py checks every kind of read through the async API on PostgreSQL
# against the sync API's answers. These four modules' async PostgreSQL variant (200 tests,
# about 20 s of the machine's CPU) is deselected, not skipped.
READ_ONLY_MODULES = {"test_search.py", "test_listing.py", "test_lineage.py", "test_conversation.py"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the async PostgreSQL variant of :data:`READ_ONLY_MODULES`' tests."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        read_only = item.path.parent.name == "sessiondb" and item.path.name in READ_ONLY_MODULES
        if read_only and params.get("backend") == "postgresql" and params.get("api") == "async":
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(params=APIS)
def api(request: pytest.FixtureRequest) -> str:
    """Which API the test drives: ``SessionDB``, or ``AsyncSessionDB`` through a blocking proxy."""
    return str(request.param)


def async_test_url(url: str) -> str:
    """``url`` on the async PostgreSQL driver the run asks for
    (``HERMES_TEST_ASYNC_PG_DRIVER``, e.g. asyncpg; default: the store's psycopg_async)."""
    driver = os.environ.get("HERMES_TEST_ASYNC_PG_DRIVER")
    if driver and url.startswith("postgresql"):
        return sa_make_url(url).set(drivername=f"postgresql+{driver}").render_as_string(False)
    return url


def open_store(api: str, target: str | Path) -> SessionDB:
    """A ``SessionDB``, or an ``AsyncSessionDB`` that looks like one (see ``async_proxy``)."""
    if api == "async":
        if isinstance(target, str):
            target = async_test_url(target)
        return BlockingAsyncSessionDB(target)  # type: ignore[return-value]
    return SessionDB(target)


@pytest.fixture
def db(request: pytest.FixtureRequest, backend: str, api: str, tmp_path: Path) -> Iterator[SessionDB]:
    """A brand-new store (a SQLite file in ``tmp_path``, or emptied PostgreSQL tables)."""
    if backend == "postgresql":
        request.getfixturevalue("pg_emptier")()
        if request.path.name in OWN_ENGINE_MODULES:
            store = open_store(api, request.getfixturevalue("pg_store_url"))
        elif api == "sync":
            store = SessionDB(engine=request.getfixturevalue("pg_shared_engine"))
        else:
            runner, engine = request.getfixturevalue("pg_shared_async")
            store = BlockingAsyncSessionDB(runner=runner, engine=engine)  # type: ignore[assignment]
    else:
        image = request.getfixturevalue("fresh_db_image")
        path = tmp_path / "state.db"
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(image)
        store = open_store(api, path)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def open_db(tmp_path: Path, request: pytest.FixtureRequest, api: str) -> Iterator[Callable[..., SessionDB]]:
    """``open_db(path=None)``: open (another) store of the test's API; all closed at teardown."""
    if "backend" in request.fixturenames and request.getfixturevalue("backend") == "postgresql":
        pytest.skip("opens SQLite files by path")
    opened: list[SessionDB] = []

    def _open(path: str | Path | None = None) -> SessionDB:
        store = open_store(api, tmp_path / "state.db" if path is None else path)
        opened.append(store)
        return store

    try:
        yield _open
    finally:
        for store in opened:
            store.close()


class RawSql:
    """Direct SQL on the store's file, for arranging clock values and inspecting storage."""

    def __init__(self, store: SessionDB) -> None:
        self.store = store
        self.postgres = store.engine.dialect.name == "postgresql"

    @property
    def conn(self) -> sqlite3.Connection:
        conn = self.store._conn
        assert conn is not None
        return conn

    def sqlite_only(self, what: str) -> None:
        """Skip the test on PostgreSQL: ``what`` exists only in SQLite."""
        if self.postgres:
            pytest.skip(f"{what} is SQLite-specific (see docs/postgresql.md)")

    def _sql(self, sql: str) -> str:
        # psycopg uses %s placeholders where sqlite3 uses ?.
        return sql.replace("?", "%s") if self.postgres else sql

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        self.conn.execute(self._sql(sql), params)

    def one(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        row = self.conn.execute(self._sql(sql), params).fetchone()
        return None if row is None else row[0]

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self.conn.execute(self._sql(sql), params).fetchall()]

    def column(self, table: str, column: str, key: Any, key_column: str = "id") -> Any:
        return self.one(f"SELECT {column} FROM {table} WHERE {key_column} = ?", (key,))

    def typeof(self, table: str, column: str, key: Any) -> str:
        self.sqlite_only("typeof()")
        return str(self.one(f"SELECT typeof({column}) FROM {table} WHERE id = ?", (key,)))

    def set_started(self, session_id: str, started_at: float) -> None:
        self.execute("UPDATE sessions SET started_at = ? WHERE id = ?", (started_at, session_id))

    def set_ended(self, session_id: str, ended_at: float | None, reason: str | None) -> None:
        self.execute(
            "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ?", (ended_at, reason, session_id)
        )

    def set_message_time(self, message_id: int, timestamp: float) -> None:
        self.execute("UPDATE messages SET timestamp = ? WHERE id = ?", (timestamp, message_id))

    def fts_integrity_check(self) -> None:
        """FTS5's own integrity check on both indexes; raises if either is inconsistent."""
        self.sqlite_only("FTS5")
        for table in ("messages_fts", "messages_fts_trigram"):
            self.execute(f"INSERT INTO {table}({table}, rank) VALUES('integrity-check', 1)")

    def fts_rowids(self, table: str, query: str) -> list[int]:
        self.sqlite_only("FTS5")
        return [
            int(r[0])
            for r in self.rows(f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rowid", (query,))
        ]


@pytest.fixture
def raw(db: SessionDB) -> RawSql:
    """Raw SQL helpers bound to the ``db`` fixture's file."""
    return RawSql(db)


class SessionFactory:
    """Creates sessions with literal clock values: ``make("a", started=100.0, ...)``."""

    def __init__(self, store: SessionDB, raw_sql: RawSql) -> None:
        self.store = store
        self.raw = raw_sql

    def __call__(
        self,
        session_id: str,
        *,
        started: float,
        source: str = "cli",
        parent: str | None = None,
        ended: float | None = None,
        reason: str | None = None,
        **kwargs: Any,
    ) -> str:
        self.store.create_session(session_id, source, parent_session_id=parent, **kwargs)
        self.raw.set_started(session_id, started)
        if ended is not None or reason is not None:
            self.raw.set_ended(session_id, ended, reason)
        return session_id


@pytest.fixture
def make_session(db: SessionDB, raw: RawSql) -> SessionFactory:
    """``make_session(id, started=…, source=…, parent=…, ended=…, reason=…, **create kwargs)``."""
    return SessionFactory(db, raw)
