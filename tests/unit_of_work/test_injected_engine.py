"""An engine handed to ``SessionDB(engine=…)`` is configured, never disposed.

A plain ``sqlalchemy.create_engine("sqlite:///…")`` knows nothing of the store's needs
(WAL, foreign keys, ``BEGIN IMMEDIATE`` for writes); the store gives its connections
the same settings as its own engines. The engine stays the caller's: ``close()`` ends
the store's use of it and leaves its pool alone.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from hermes_store import SessionDB, create_engine
from hermes_store.db.engine import adopt_engine, is_configured


def settings(connection: sa.Connection) -> tuple[str, int]:
    journal = connection.exec_driver_sql("PRAGMA journal_mode").scalar()
    foreign_keys = connection.exec_driver_sql("PRAGMA foreign_keys").scalar()
    return str(journal), int(foreign_keys or 0)


def test_an_injected_engine_gets_wal_foreign_keys_and_immediate_writes(db_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{db_path}")
    statements: list[str] = []

    @sa.event.listens_for(engine, "connect")
    def trace(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.set_trace_callback(statements.append)

    db = SessionDB(engine=engine)
    db.create_session("s", "cli")
    statements.clear()
    db.set_meta("k", "v")
    assert "BEGIN IMMEDIATE" in statements
    with engine.connect() as connection:
        assert settings(connection) == ("wal", 1)
    # foreign_keys is on: a message for a session that does not exist is refused.
    with pytest.raises(sqlite3.IntegrityError):
        db.append_message("missing", "user", "orphan")
    assert db.message_count() == 0
    db.close()
    engine.dispose()


def test_connections_pooled_before_injection_are_configured_too(db_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{db_path}", pool_size=3)
    held = [engine.connect() for _ in range(3)]
    for connection in held:
        connection.exec_driver_sql("SELECT 1")
        connection.close()  # back to the pool, still with sqlite3's defaults
    db = SessionDB(engine=engine)
    held = [engine.connect() for _ in range(3)]
    try:
        assert [settings(connection) for connection in held] == [("wal", 1)] * 3
    finally:
        for connection in held:
            connection.close()
    db.close()
    engine.dispose()


def test_close_never_disposes_the_callers_engine(db_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{db_path}")
    db = SessionDB(engine=engine)
    db.create_session("s", "cli")
    db.append_message("s", "user", "kept")
    pool = engine.pool
    db.close()
    assert engine.pool is pool  # dispose() would have replaced it
    assert pool.checkedin() >= 1  # the caller's pooled connections are still there
    with engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT COUNT(*) FROM messages").scalar() == 1
    engine.dispose()


def test_the_stores_own_engine_is_disposed_on_close(db_path: Path) -> None:
    db = SessionDB(db_path)
    pool = db.engine.pool
    db.set_meta("k", "v")
    db.close()
    assert db.engine.pool is not pool


def test_engines_of_create_engine_are_not_configured_twice(db_path: Path) -> None:
    engine = create_engine(db_path, prepare=True)
    assert is_configured(engine)
    assert adopt_engine(engine) is engine
    plain = sa.create_engine(f"sqlite:///{db_path}")
    assert not is_configured(plain)
    assert adopt_engine(adopt_engine(plain)) is plain and is_configured(plain)
    engine.dispose()
    plain.dispose()


def test_waiting_out_a_locked_file_on_open_keeps_the_callers_pool(db_path: Path) -> None:
    SessionDB(db_path).close()
    engine = sa.create_engine(f"sqlite:///{db_path}", connect_args={"timeout": 0.1})
    pool = engine.pool
    holder = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")  # nobody else can even read until it lets go
    release = threading.Timer(1.5, holder.close)  # longer than the busy timeouts
    release.start()
    try:
        db = SessionDB(engine=engine)  # waits the lock out (ensure_schema's retry loop)
    finally:
        release.join()
    db.set_meta("k", "v")
    db.close()
    assert engine.pool is pool
    engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_raw_connection_goes_back_to_the_callers_pool_as_it_came(
    backend: str, db_path: Path, request: pytest.FixtureRequest
) -> None:
    """``_conn`` (upstream's raw connection) is made autocommit and, on SQLite, given
    ``sqlite3.Row`` rows; closing the store undoes both before the connection returns to
    the caller's pool, so the next user of that pool — another store's writes — gets a
    connection whose transactions roll back."""
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else f"sqlite:///{db_path}"
    engine = sa.create_engine(url)
    try:
        first = SessionDB(engine=engine)
        raw = first._conn
        assert raw is not None
        raw.execute("INSERT INTO state_meta(key, value) VALUES ('raw', 'autocommitted')")
        first.close()
        driver: Any = raw  # the driver connection, back in the caller's pool
        if backend == "postgresql":
            assert driver.autocommit is False
        else:
            assert driver.row_factory is None
        second = SessionDB(engine=engine)
        try:

            def half(conn: Any) -> None:
                conn.execute("INSERT INTO state_meta(key, value) VALUES ('half', 'written')")
                raise ValueError("boom")

            with pytest.raises(ValueError, match="boom"):
                second._execute_write(half)
            assert second.get_meta("half") is None
            assert second.get_meta("raw") == "autocommitted"
        finally:
            second.close()
    finally:
        engine.dispose()
