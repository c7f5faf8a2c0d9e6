"""The store checkpoints its WAL itself: every 50 writes and on close, as upstream Hermes does.

SQLite's own automatic checkpoint (every 1,000 WAL pages) is turned off on the store's
write connection, where it would add a checkpoint and an ``fsync`` every 20-odd appends
(CHANGELOG.md, 2026-12-04). What must hold: the WAL stays bounded by the store's own
rhythm, nothing committed is lost, and a connection the store borrowed from a caller's
pool goes back with the caller's setting.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from hermes_store import SessionDB

# Big enough that 50 appends write well over SQLite's 1,000-page automatic threshold.
_TEXT = " ".join(f"word{n} 文字{n % 97} deploy-{n % 13}" for n in range(120))


def _wal_pages(db_path: Path) -> int:
    wal = Path(f"{db_path}-wal")
    return wal.stat().st_size // 4096 if wal.exists() else 0


def _autocheckpoint(connection: Any) -> int:
    return int(connection.execute("PRAGMA wal_autocheckpoint").fetchone()[0])


def test_the_write_connection_leaves_checkpoints_to_the_store(db_path: Path) -> None:
    db = SessionDB(db_path)
    db.create_session("s", "cli")
    db.append_message("s", "user", _TEXT)
    driver = db._uow._write_connection.connection.dbapi_connection  # type: ignore[union-attr]
    assert _autocheckpoint(driver) == 0
    db.close()


def test_the_wal_stays_bounded_by_the_stores_own_checkpoints(db_path: Path) -> None:
    db = SessionDB(db_path)
    db.create_session("s", "cli")
    for n in range(10):  # no checkpoint yet: what one append adds to the WAL
        db.append_message("s", "user", f"{n} {_TEXT}")
    per_write = _wal_pages(db_path) / 10
    largest = 0
    for n in range(10, 400):
        db.append_message("s", "user", f"{n} {_TEXT}")
        largest = max(largest, _wal_pages(db_path))
    # The store checkpoints every 50 writes and the WAL is reused from its start after
    # one, so it holds a bounded run of writes (about 90 here: a restart waits for a
    # checkpoint that copied the whole WAL), never all 400.
    assert largest > 1_000  # SQLite's own checkpoint would have stepped in here
    assert largest < 120 * per_write  # 400 writes without a checkpoint: 400 * per_write
    db.close()
    with sqlite3.connect(db_path) as check:
        assert check.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 400
        assert check.execute("SELECT message_count FROM sessions").fetchone()[0] == 400
        assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_borrowed_connection_goes_back_with_the_callers_setting(db_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{db_path}", pool_size=1, max_overflow=0)

    @sa.event.listens_for(engine, "connect")
    def caller_setting(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute("PRAGMA wal_autocheckpoint=321")

    try:
        db = SessionDB(engine=engine)
        db.create_session("s", "cli")
        db.append_message("s", "user", "hello")
        driver = db._uow._write_connection.connection.dbapi_connection  # type: ignore[union-attr]
        assert _autocheckpoint(driver) == 0
        db.close()
        with engine.connect() as connection:  # the pool's one connection: the store's writer
            assert connection.connection.dbapi_connection is driver
            assert _autocheckpoint(driver) == 321
    finally:
        engine.dispose()


def test_closing_a_store_whose_write_connection_broke_discards_it(db_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{db_path}")
    try:
        db = SessionDB(engine=engine)
        db.create_session("s", "cli")
        connection = db._uow._write_connection
        assert connection is not None
        connection.connection.dbapi_connection.close()  # type: ignore[union-attr]
        db.close()  # the setting cannot be restored: the connection is not pooled again
        assert connection.closed
        with engine.connect() as fresh:
            assert fresh.exec_driver_sql("SELECT COUNT(*) FROM sessions").scalar() == 1
            assert _autocheckpoint(fresh.connection.dbapi_connection) == 1000
    finally:
        engine.dispose()
