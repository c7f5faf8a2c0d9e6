"""A new SQLite file is created from the head snapshot (``hermes_store.schema.sqlite_head``).

The snapshot must be exactly what the Alembic history leaves on an empty file: retaken
from the real history it is the shipped one, and a file made from it equals a file made
by the ``alembic`` command, object by object and row by row, shadow tables and pragmas
included. Anything but a new, empty file at head still goes through Alembic.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from legacy_db import fts_integrity_check
from support import run_alembic

from hermes_store import SessionDB
from hermes_store.db.engine import create_engine
from hermes_store.schema import migrate, sqlite_head
from hermes_store.schema.revisions import history

PRAGMAS = ("user_version", "application_id", "auto_vacuum", "page_size", "journal_mode", "encoding")


def file_state(path: Path) -> dict[str, Any]:
    """Everything a file holds that a schema creation could make differ."""
    with closing(sqlite3.connect(path)) as conn:
        catalog = sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall())
        tables = [row[1] for row in catalog if row[0] == "table" and not row[3].startswith("CREATE VIRTUAL")]
        rows = {}
        for table in tables:
            cursor = conn.execute(f'SELECT * FROM "{table}"')
            rows[table] = sorted(cursor.fetchall(), key=repr)
        pragmas = {name: conn.execute(f"PRAGMA {name}").fetchall() for name in PRAGMAS}
        integrity = conn.execute("PRAGMA integrity_check").fetchall()
    return {"catalog": catalog, "rows": rows, "pragmas": pragmas, "integrity": integrity}


def test_the_shipped_snapshot_is_what_the_history_creates_at_head() -> None:
    shipped = sqlite_head.read_snapshot()
    assert shipped is not None
    retaken = sqlite_head.snapshot_of_history()
    assert retaken.revision == history().head
    assert shipped == retaken, (
        "hermes_store/schema/sqlite_head.json is stale: retake it with "
        "python -c 'from hermes_store.schema.sqlite_head import main; main()'"
    )
    assert sqlite_head.shipped_snapshot() == shipped


def test_a_new_file_equals_one_the_alembic_command_migrates(tmp_path: Path) -> None:
    by_store = tmp_path / "store.db"
    SessionDB(by_store).close()
    by_alembic = tmp_path / "alembic.db"
    run_alembic(by_alembic, "upgrade", "head")

    made, migrated = file_state(by_store), file_state(by_alembic)
    assert made["catalog"] == migrated["catalog"]
    assert made["rows"] == migrated["rows"]
    assert made["pragmas"] == migrated["pragmas"]
    assert made["integrity"] == migrated["integrity"] == [("ok",)]
    assert ("table", "messages_fts_trigram_config", "messages_fts_trigram_config") in {
        row[:3] for row in made["catalog"]
    }  # the comparison saw the shadow tables
    for table in ("messages_fts", "messages_fts_trigram"):
        fts_integrity_check(by_store, table)


def test_a_file_made_from_the_snapshot_migrates_down_and_up_with_alembic(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        db.create_session("s1", "cli")
        db.append_message("s1", "user", "snapshot 快照 café")
    run_alembic(path, "downgrade", "0001")
    run_alembic(path, "upgrade", "head")
    with SessionDB(path) as db:
        assert migrate.current_revision(path) == history().head
        assert [hit["session_id"] for hit in db.search_messages("snapshot")] == ["s1"]
        assert [hit["session_id"] for hit in db.search_messages("快照")] == ["s1"]


def test_a_file_that_is_not_empty_goes_through_alembic(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('kept')")
        conn.commit()
    engine = create_engine(path)
    try:
        with engine.begin() as connection:
            assert sqlite_head.create_if_empty(connection, "head") is False
    finally:
        engine.dispose()
    migrate.upgrade(path)
    state = file_state(path)
    assert state["rows"]["notes"] == [("kept",)]
    assert state["rows"]["alembic_version"] == [(history().head,)]
    without_notes = [row for row in state["catalog"] if row[1] != "notes"]
    reference = tmp_path / "reference.db"
    migrate.upgrade(reference)
    assert without_notes == file_state(reference)["catalog"]


@pytest.mark.parametrize("revision", ["0011", "0001"])
def test_only_head_is_made_from_the_snapshot(tmp_path: Path, revision: str) -> None:
    path = tmp_path / "older.db"
    engine = create_engine(path)
    try:
        with engine.begin() as connection:
            assert sqlite_head.create_if_empty(connection, revision) is False
            assert connection.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar() == 0
    finally:
        engine.dispose()
    migrate.upgrade(path, revision)
    assert migrate.current_revision(path) == revision


def test_a_snapshot_of_another_revision_is_not_used(tmp_path: Path) -> None:
    shipped = sqlite_head.read_snapshot()
    assert shipped is not None
    stale = tmp_path / "stale.json"
    stale.write_text(shipped.as_json().replace(f'"{shipped.revision}"', '"0015"'), encoding="utf-8")
    old = sqlite_head.read_snapshot(stale)
    assert old is not None and old.revision == "0015"
    assert sqlite_head.at_head(old) is False
    assert sqlite_head.at_head(shipped) is True
    assert sqlite_head.read_snapshot(tmp_path / "missing.json") is None


def test_a_value_json_cannot_hold_is_refused(tmp_path: Path) -> None:
    engine = create_engine(tmp_path / "blob.db")
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql("CREATE TABLE seeds (value BLOB)")
            connection.exec_driver_sql("INSERT INTO seeds VALUES (x'00')")
        with engine.connect() as connection, pytest.raises(ValueError, match="seeds holds a value"):
            sqlite_head.take_snapshot(connection, "0016")
    finally:
        engine.dispose()
