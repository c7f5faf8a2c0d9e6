"""``backup_sqlite`` opens the store named by its path, whatever characters the path holds.

SQLite reads ``file:`` URIs: ``#`` ends the path, ``?`` starts parameters and ``%xx`` is
an escape, so an unquoted path would name another file (and, without ``mode=rw`` being
seen, create it empty: a backup of nothing reported as a success).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hermes_store.admin.backup import BackupFailed, backup_sqlite
from hermes_store.api.session_db import SessionDB

ODD_FOLDERS = ["fragment#x", "query?mode=ro&x=1", "percent %41 %2F %%", "plain"]


def _count(path: Path, table: str) -> int:
    connection = sqlite3.connect(path)
    try:
        return int(connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        connection.close()


@pytest.mark.parametrize("folder", ODD_FOLDERS)
def test_backup_copies_the_store_at_an_odd_path(tmp_path: Path, folder: str) -> None:
    source = tmp_path / folder / "state.db"
    with SessionDB(source) as store:
        store.create_session("s", "cli")
        store.append_message("s", "user", "kept in the backup")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    target = tmp_path / "copy.db"
    result = backup_sqlite(source, target)
    assert (result.messages, result.sessions, result.integrity) == (1, 1, "ok")
    assert _count(target, "messages") == 1
    # Nothing else was created (no truncated-path database beside the real one).
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert after == sorted([*before, Path("copy.db")])


def test_backup_of_a_missing_store_fails_and_creates_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "gone#x"
    folder.mkdir()
    with pytest.raises(BackupFailed, match="no database at"):
        backup_sqlite(folder / "state.db", tmp_path / "copy.db")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["gone#x"]


def test_backup_refuses_its_own_source_as_destination(tmp_path: Path) -> None:
    source = tmp_path / "a?b" / "state.db"
    SessionDB(source).close()
    with pytest.raises(BackupFailed):
        backup_sqlite(source, source, overwrite=True)
