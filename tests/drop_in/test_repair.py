"""Repairing a damaged ``state.db``: a duplicated ``sqlite_master`` row (SQLite refuses every
statement) and a corrupt FTS index (reads work, message inserts fail). The conversations
survive, a byte copy of the damaged file is kept, and the drop-in's ``SessionDB`` repairs
a malformed file by itself, once per process."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import hermes_state


@pytest.fixture(autouse=True)
def _no_repair_attempted_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hermes_state, "_repair_attempted_paths", set())


def _store_with_messages(path: Path) -> None:
    db = hermes_state.SessionDB(path)
    db.create_session("s1", "cli")
    for n in range(4):
        db.append_message("s1", "user", f"pizza order {n}")
        db.append_message("s1", "assistant", f"noted {n}")
    db.close()


def _duplicate_fts_schema_row(path: Path) -> None:
    conn = sqlite3.connect(str(path))
    conn.execute("PRAGMA writable_schema=ON")
    conn.execute(
        "INSERT INTO sqlite_master (type, name, tbl_name, rootpage, sql) "
        "SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master WHERE name = 'messages_fts'"
    )
    conn.commit()
    conn.close()


def _scramble_fts_index(path: Path) -> None:
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("UPDATE messages_fts_data SET block = X'0BADF00D0BADF00D'")
    conn.close()


def _rows(path: Path) -> tuple[int, int]:
    conn = sqlite3.connect(str(path))
    try:
        return (
            conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0],
            conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0],
        )
    finally:
        conn.close()


def test_a_healthy_file_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _store_with_messages(path)
    assert hermes_state._db_opens_cleanly(path) is None
    before = path.read_bytes()
    report = hermes_state.repair_state_db_schema(path)
    assert report == {"repaired": True, "strategy": "already_healthy", "backup_path": None, "error": None}
    assert path.read_bytes() == before


def test_a_duplicated_schema_row_is_removed_and_the_rows_survive(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _store_with_messages(path)
    _duplicate_fts_schema_row(path)
    conn = sqlite3.connect(str(path))
    with pytest.raises(sqlite3.DatabaseError) as refused:
        conn.execute("PRAGMA journal_mode").fetchone()
    conn.close()
    assert hermes_state.is_malformed_db_error(refused.value)
    assert hermes_state._db_opens_cleanly(path) is not None

    report = hermes_state.repair_state_db_schema(path)

    assert report["repaired"] is True and report["strategy"] in {"dedup_schema", "drop_fts_rebuild"}
    assert report["backup_path"] and Path(report["backup_path"]).read_bytes()[:16] == b"SQLite format 3\x00"
    assert _rows(path) == (1, 8)
    db = hermes_state.SessionDB(path)
    try:
        assert len(db.search_messages("pizza")) == 4
    finally:
        db.close()


def test_a_corrupt_fts_index_is_rebuilt_in_place(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _store_with_messages(path)
    _scramble_fts_index(path)
    assert _rows(path) == (1, 8)  # reads still work: only the write probe notices
    assert hermes_state._db_opens_cleanly(path) is not None

    report = hermes_state.repair_state_db_schema(path, backup=False)

    assert report["repaired"] is True and report["backup_path"] is None
    assert hermes_state._db_opens_cleanly(path) is None
    db = hermes_state.SessionDB(path)
    try:
        db.append_message("s1", "user", "one more pizza")
        assert len(db.search_messages("pizza")) == 5
    finally:
        db.close()


def test_when_nothing_milder_works_the_fts_schema_is_dropped_and_rebuilt_on_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.db"
    _store_with_messages(path)
    _duplicate_fts_schema_row(path)
    real_check = hermes_state._db_opens_cleanly

    def unhealthy_while_fts_exists(db_path: Path) -> str | None:
        try:
            conn = sqlite3.connect(str(db_path))
            has_fts = conn.execute(
                "SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'messages_fts%'"
            ).fetchone()[0]
            conn.close()
        except sqlite3.DatabaseError:
            return "schema unreadable"
        return "pretend the milder cures failed" if has_fts else real_check(db_path)

    monkeypatch.setattr(hermes_state, "_db_opens_cleanly", unhealthy_while_fts_exists)
    report = hermes_state.repair_state_db_schema(path)
    monkeypatch.undo()

    assert report["strategy"] == "drop_fts_rebuild" and report["repaired"] is True
    db = hermes_state.SessionDB(path)  # recreates the FTS objects and refills them
    try:
        assert len(db.search_messages("pizza")) == 4
        assert db._fts_table_exists("messages_fts") and db._fts_table_exists("messages_fts_trigram")
    finally:
        db.close()


def test_an_unrepairable_file_is_reported_with_its_copy_kept(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\x00\xde\xad\xbe\xef" * 200)
    report = hermes_state.repair_state_db_schema(path)
    assert report["repaired"] is False and report["error"]
    assert Path(report["backup_path"]).read_bytes() == path.read_bytes()


def test_a_missing_file_is_reported(tmp_path: Path) -> None:
    report = hermes_state.repair_state_db_schema(tmp_path / "absent.db")
    assert report["repaired"] is False and "does not exist" in report["error"]


def test_opening_a_malformed_file_repairs_it_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.db"
    _store_with_messages(path)
    _duplicate_fts_schema_row(path)
    db = hermes_state.SessionDB(path)
    try:
        assert [m["content"] for m in db.get_messages("s1")][:2] == ["pizza order 0", "noted 0"]
    finally:
        db.close()
    assert list(tmp_path.glob("state.db.malformed-backup-*"))

    _duplicate_fts_schema_row(path)  # damaged again: this process already tried once
    calls: list[Path] = []
    monkeypatch.setattr(hermes_state, "repair_state_db_schema", lambda p, **kw: calls.append(p) or {})
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):
        hermes_state.SessionDB(path)
    assert calls == []


def test_a_file_that_is_not_a_database_is_not_repaired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"definitely not a database, but long enough to be read as one" * 20)
    calls: list[Path] = []
    monkeypatch.setattr(hermes_state, "repair_state_db_schema", lambda p, **kw: calls.append(p) or {})
    with pytest.raises(sqlite3.DatabaseError):
        hermes_state.SessionDB(path)
    assert calls == []


def test_is_malformed_db_error_only_knows_the_malformed_class() -> None:
    assert hermes_state.is_malformed_db_error(sqlite3.DatabaseError("database disk image is malformed"))
    assert hermes_state.is_malformed_db_error(sqlite3.DatabaseError("malformed database schema (x)"))
    assert not hermes_state.is_malformed_db_error(sqlite3.OperationalError("database is locked"))
    assert not hermes_state.is_malformed_db_error(ValueError("malformed database schema"))
