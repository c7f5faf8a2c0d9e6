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

from hermes_store import SessionDB


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


@pytest.fixture
def db(tmp_path: Path, fresh_db_image: bytes) -> Iterator[SessionDB]:
    """A brand-new store at ``tmp_path / "state.db"``, closed at teardown."""
    path = tmp_path / "state.db"
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(fresh_db_image)
    store = SessionDB(path)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def open_db(tmp_path: Path) -> Iterator[Callable[..., SessionDB]]:
    """``open_db(path=None)``: open (another) store; every one is closed at teardown."""
    opened: list[SessionDB] = []

    def _open(path: str | Path | None = None) -> SessionDB:
        store = SessionDB(tmp_path / "state.db" if path is None else path)
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

    @property
    def conn(self) -> sqlite3.Connection:
        conn = self.store._conn
        assert conn is not None
        return conn

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        self.conn.execute(sql, params)

    def one(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self.conn.execute(sql, params).fetchall()]

    def column(self, table: str, column: str, key: Any, key_column: str = "id") -> Any:
        return self.one(f"SELECT {column} FROM {table} WHERE {key_column} = ?", (key,))

    def typeof(self, table: str, column: str, key: Any) -> str:
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
        for table in ("messages_fts", "messages_fts_trigram"):
            self.execute(f"INSERT INTO {table}({table}, rank) VALUES('integrity-check', 1)")

    def fts_rowids(self, table: str, query: str) -> list[int]:
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
