"""Where WAL cannot be enabled the store falls back to DELETE, with a warning.

SQLite's ``unix-dotfile`` VFS has no shared-memory support, so it refuses WAL exactly as
a network file system does; opening through it exercises the fallback for real.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from sqlalchemy import make_url

from hermes_store import SessionDB
from hermes_store.db.engine import JournalModeWarning, create_engine, sqlite_path


def _dotfile_url(path: Path) -> str:
    return f"sqlite:///file:{path}?vfs=unix-dotfile&uri=true"


def test_store_without_wal_falls_back_to_delete_and_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with pytest.warns(JournalModeWarning, match="journal_mode=DELETE"):
        db = SessionDB(url=_dotfile_url(path))
    db.create_session("s", "cli")
    db.append_message("s", "user", "still stored without WAL")
    assert db._conn is not None
    assert db._conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert [hit["id"] for hit in db.search_messages("stored")] == [1]
    db.close()
    assert not Path(f"{path}-wal").exists()


def test_the_fallback_warns_once_per_engine(tmp_path: Path) -> None:
    engine = create_engine(_dotfile_url(tmp_path / "state.db"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            with engine.connect() as connection:
                connection.exec_driver_sql("SELECT 1")
            engine.dispose()
    assert sum(issubclass(w.category, JournalModeWarning) for w in caught) == 1


def test_uri_filenames_resolve_to_their_file(tmp_path: Path) -> None:
    url = create_engine(_dotfile_url(tmp_path / "a.db")).url
    assert sqlite_path(url) == tmp_path / "a.db"
    assert sqlite_path(make_url("sqlite:///file:mem?mode=memory&uri=true")) is None
    assert sqlite_path(make_url("sqlite://")) is None
    assert sqlite_path(make_url("postgresql://h/db")) is None
