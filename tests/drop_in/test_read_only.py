"""``SessionDB(read_only=True)``: an existing store used as it is, on both backends. Reads
and search work; every write raises sqlite3's read-only error; nothing is created or
migrated."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import hermes_state
from hermes_store import SessionDB
from hermes_store.errors import DatabaseNotFound


@pytest.fixture(params=["sqlite", "postgresql"])
def filled(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store holding session ``s1`` with two messages, closed again."""
    target = (
        str(request.getfixturevalue("pg_head_url"))
        if request.param == "postgresql"
        else str(tmp_path / "state.db")
    )
    db = SessionDB(target)
    db.create_session("s1", "cli", model="m")
    db.append_message("s1", "user", "where is the lighthouse")
    db.append_message("s1", "assistant", "on the northern cape")
    db.close()
    return target


def test_reads_and_search_work(filled: str) -> None:
    db = SessionDB(filled, read_only=True)
    try:
        assert db.read_only is True
        assert db.get_session("s1")["model"] == "m"  # type: ignore[index]
        assert [m["role"] for m in db.get_messages("s1")] == ["user", "assistant"]
        assert [hit["session_id"] for hit in db.search_messages("lighthouse")] == ["s1"]
        assert db.session_count() == 1
    finally:
        db.close()


@pytest.mark.parametrize(
    "write",
    [
        lambda db: db.create_session("s2", "cli"),
        lambda db: db.append_message("s1", "user", "more"),
        lambda db: db.set_meta("k", "v"),
        lambda db: db.optimize_fts(),
        lambda db: db.vacuum(),
        lambda db: db._execute_write(lambda conn: None),
    ],
    ids=["create_session", "append_message", "set_meta", "optimize_fts", "vacuum", "_execute_write"],
)
def test_writes_raise_sqlites_read_only_error(filled: str, write: object) -> None:
    db = SessionDB(filled, read_only=True)
    try:
        with pytest.raises(sqlite3.OperationalError, match="attempt to write a readonly database"):
            write(db)  # type: ignore[operator]
        assert db.message_count("s1") == 2
    finally:
        db.close()


def test_the_sqlite_file_is_not_changed(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    SessionDB(path).close()
    before = path.read_bytes()
    db = hermes_state.SessionDB(path, True)  # upstream passes it positionally too
    try:
        assert db.get_session("nope") is None
        assert db.search_messages("anything") == []
    finally:
        db.close()
    assert path.read_bytes() == before


def test_a_missing_file_is_not_created(tmp_path: Path) -> None:
    with pytest.raises(DatabaseNotFound):
        SessionDB(tmp_path / "absent.db", read_only=True)
    assert not (tmp_path / "absent.db").exists()


def test_an_in_memory_store_cannot_be_read_only() -> None:
    with pytest.raises(ValueError, match="read_only"):
        SessionDB(":memory:", read_only=True)
