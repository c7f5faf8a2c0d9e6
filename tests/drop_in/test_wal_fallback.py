"""``hermes_state.apply_wal_with_fallback`` on plain sqlite3 connections: WAL where it works,
the rollback journal where the file system refuses WAL (warned once per database label),
every other error raised, and a file already in WAL never downgraded."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

import hermes_state


@pytest.fixture(autouse=True)
def _fresh_warning_labels() -> None:
    hermes_state._wal_fallback_warned_paths.clear()


class _RefusingWal(sqlite3.Connection):
    """A connection whose ``PRAGMA journal_mode=WAL`` fails with ``reason`` (a file system
    without WAL support); it records every statement it is given."""

    reason: str | None = "locking protocol"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.statements: list[str] = []

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:  # type: ignore[override]
        self.statements.append(sql)
        if self.reason and sql.replace(" ", "").lower() == "pragmajournal_mode=wal":
            raise sqlite3.OperationalError(self.reason)
        return super().execute(sql, *args)  # type: ignore[arg-type]


def _refusing(path: Path, reason: str | None = "locking protocol") -> _RefusingWal:
    """A connection to ``path`` refusing WAL with ``reason`` (``None``: only tracing)."""
    factory = type("Refusing", (_RefusingWal,), {"reason": reason})
    return sqlite3.connect(str(path), isolation_level=None, factory=factory)  # type: ignore[return-value]


def _journal_mode(path: Path) -> str:
    conn = sqlite3.connect(str(path))
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
    finally:
        conn.close()


def test_a_new_file_is_switched_to_wal(tmp_path: Path) -> None:
    conn = sqlite3.connect(str(tmp_path / "new.db"))
    assert hermes_state.apply_wal_with_fallback(conn) == "wal"
    conn.close()
    assert _journal_mode(tmp_path / "new.db") == "wal"


def test_a_file_already_in_wal_is_not_switched_again(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    seed = sqlite3.connect(str(path))
    seed.execute("PRAGMA journal_mode=WAL")
    seed.close()
    conn = _refusing(path)
    assert hermes_state.apply_wal_with_fallback(conn) == "wal"
    assert not any("=" in sql for sql in conn.statements), conn.statements
    conn.close()


@pytest.mark.parametrize("reason", ["locking protocol", "not authorized"])
def test_a_file_system_without_wal_gets_the_rollback_journal_and_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, reason: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="hermes_state"):
        for n in range(3):
            conn = _refusing(tmp_path / f"nfs-{n}.db", reason)
            assert hermes_state.apply_wal_with_fallback(conn, db_label="kanban.db") == "delete"
            conn.execute("CREATE TABLE t (x)")  # the database works in the rollback journal
            conn.close()
    warnings = [r for r in caplog.records if r.name == "hermes_state" and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "kanban.db" in warnings[0].getMessage() and "journal_mode=DELETE" in warnings[0].getMessage()
    assert _journal_mode(tmp_path / "nfs-0.db") == "delete"


def test_each_database_label_is_warned_about_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="hermes_state"):
        for label in ("state.db", "projects.db", "state.db"):
            conn = _refusing(tmp_path / f"{label}-{len(caplog.records)}")
            hermes_state.apply_wal_with_fallback(conn, db_label=label)
            conn.close()
    assert sorted(r.getMessage().split(":")[0] for r in caplog.records) == ["projects.db", "state.db"]


@pytest.mark.parametrize("reason", ["disk I/O error", "no such table: t"])
def test_other_errors_are_raised_not_taken_for_a_missing_wal(tmp_path: Path, reason: str) -> None:
    conn = _refusing(tmp_path / "flaky.db", reason)
    with pytest.raises(sqlite3.OperationalError, match=reason):
        hermes_state.apply_wal_with_fallback(conn)
    conn.close()
    assert _journal_mode(tmp_path / "flaky.db") == "delete"  # untouched (SQLite's default)


def test_macos_gets_the_checkpoint_barrier_and_other_systems_do_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hermes_state.sys, "platform", "darwin")
    for _ in ("switched to WAL", "already in WAL"):
        mac = _refusing(tmp_path / "mac.db", reason=None)
        assert hermes_state.apply_wal_with_fallback(mac) == "wal"
        assert "PRAGMA checkpoint_fullfsync=1" in mac.statements
        mac.close()
    monkeypatch.setattr(hermes_state.sys, "platform", "linux")
    linux = _refusing(tmp_path / "linux.db", reason=None)
    assert hermes_state.apply_wal_with_fallback(linux) == "wal"
    assert not any("fullfsync" in sql for sql in linux.statements)
    linux.close()
