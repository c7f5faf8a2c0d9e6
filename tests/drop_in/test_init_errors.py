"""Why the session database is unavailable: a failed ``SessionDB()`` records its cause for
``format_session_db_unavailable``, and raises the sqlite3 error behind it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hermes_state


@pytest.fixture(autouse=True)
def _no_recorded_error() -> Iterator[None]:
    hermes_state._set_last_init_error(None)
    yield
    hermes_state._set_last_init_error(None)


def test_without_a_failure_the_message_is_bare() -> None:
    assert hermes_state.get_last_init_error() is None
    assert hermes_state.format_session_db_unavailable() == "Session database not available."
    assert hermes_state.format_session_db_unavailable(prefix="Cannot /resume") == "Cannot /resume."


def test_the_cause_is_named_and_a_wal_refusal_points_at_network_file_systems() -> None:
    hermes_state._set_last_init_error("OperationalError: unable to open database file")
    assert hermes_state.format_session_db_unavailable() == (
        "Session database not available: OperationalError: unable to open database file."
    )
    hermes_state._set_last_init_error("OperationalError: locking protocol")
    message = hermes_state.format_session_db_unavailable("Cannot /title")
    assert message.startswith("Cannot /title: OperationalError: locking protocol (")
    assert "NFS/SMB" in message and "sqlite.org/wal.html" in message and message.endswith(".")


def test_a_failed_open_records_its_cause_and_raises_the_sqlite_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_connect = sqlite3.connect

    class NoJournalModeAtAll(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
            if "journal_mode" in sql.lower():
                raise sqlite3.OperationalError("locking protocol: read-only file system")
            return super().execute(sql, *args)

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        return real_connect(*args, factory=NoJournalModeAtAll, **kwargs)

    monkeypatch.setattr(hermes_state.sqlite3, "connect", connect)
    with pytest.raises(sqlite3.OperationalError, match="locking protocol"):
        hermes_state.SessionDB(tmp_path / "state.db")
    assert hermes_state.get_last_init_error() == "OperationalError: locking protocol: read-only file system"


def test_a_successful_open_keeps_an_earlier_cause(tmp_path: Path) -> None:
    # Another thread's failure must stay reportable while this one succeeds.
    hermes_state._set_last_init_error("OperationalError: locking protocol")
    hermes_state.SessionDB(tmp_path / "state.db").close()
    assert hermes_state.get_last_init_error() == "OperationalError: locking protocol"


def test_a_store_opened_where_wal_is_refused_runs_in_the_rollback_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_connect = sqlite3.connect
    refused: list[str] = []

    class RefusingWal(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
            if "journal_mode=wal" in sql.lower().replace(" ", ""):
                refused.append(sql)
                raise sqlite3.OperationalError("locking protocol")
            return super().execute(sql, *args)

    monkeypatch.setattr(
        hermes_state.sqlite3, "connect", lambda *a, **kw: real_connect(*a, factory=RefusingWal, **kw)
    )
    db = hermes_state.SessionDB(tmp_path / "nfs.db")
    try:
        db.create_session("s1", "cli")
        assert db.get_session("s1") is not None
        assert refused
        assert hermes_state.get_last_init_error() is None
    finally:
        db.close()
