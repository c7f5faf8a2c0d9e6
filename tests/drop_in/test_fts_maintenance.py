"""``optimize_fts()`` and ``vacuum()`` on both backends and on the asyncio face, and the
drop-in's automatic merge every ``_OPTIMIZE_EVERY_N_WRITES`` writes."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

import hermes_state
from hermes_store import SessionDB
from hermes_store.aio import AsyncSessionDB


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new store's location: a SQLite file, or a PostgreSQL database at head."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("pg_head_url"))
    return str(tmp_path / "state.db")


def _segments(db: SessionDB, table: str) -> int:
    """How many index segments an FTS5 table has (rows of its ``_data`` table beyond the
    structure record, a close enough measure of fragmentation)."""
    conn = db._conn
    assert conn is not None
    return int(conn.execute(f"SELECT COUNT(*) FROM {table}_data").fetchone()[0])


def test_optimize_merges_each_index_and_search_is_unchanged(target: str) -> None:
    db = SessionDB(target)
    try:
        db.create_session("s1", "cli")
        for n in range(30):
            db.append_message("s1", "user", f"needle number {n} 大别山项目")
        before = db.search_messages("needle")
        cjk_before = db.search_messages("大别山")
        merged = db.optimize_fts()
        assert db.search_messages("needle") == before
        assert db.search_messages("大别山") == cjk_before
        assert len(before) == 20 and cjk_before
    finally:
        db.close()
    assert merged == (2 if not target.startswith("postgresql") else 0)


def test_optimize_shrinks_the_sqlite_index_and_skips_a_missing_one(tmp_path: Path) -> None:
    db = SessionDB(tmp_path / "state.db")
    try:
        db.create_session("s1", "cli")
        for n in range(40):
            db.append_message("s1", "user", f"fragment {n}")
        fragmented = _segments(db, "messages_fts")
        assert db.optimize_fts() == 2
        assert _segments(db, "messages_fts") < fragmented
        with db._lock:
            conn = db._conn
            assert conn is not None
            for action in ("insert", "delete", "update"):
                conn.execute(f"DROP TRIGGER messages_fts_trigram_{action}")
            conn.execute("DROP TABLE messages_fts_trigram")
        assert db._fts_table_exists("messages_fts_trigram") is False
        assert db._trigram_available is False and db._fts_enabled is True
        assert db.optimize_fts() == 1
    finally:
        db.close()


def test_vacuum_merges_first_and_returns_the_count(target: str) -> None:
    db = SessionDB(target)
    try:
        db.create_session("s1", "cli")
        db.append_message("s1", "user", "kept after vacuum")
        assert db.vacuum() == (0 if target.startswith("postgresql") else 2)
        assert [m["content"] for m in db.get_messages("s1")] == ["kept after vacuum"]
        assert len(db.search_messages("vacuum")) == 1
    finally:
        db.close()


def test_a_failed_merge_does_not_stop_the_vacuum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = SessionDB(tmp_path / "state.db")

    def refuse() -> int:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(db, "optimize_fts", refuse)
    try:
        assert db.vacuum() == 0
    finally:
        db.close()


def test_the_asyncio_face_offers_both(target: str) -> None:
    async def scenario() -> tuple[int, int]:
        async with AsyncSessionDB(target) as db:
            await db.create_session("s1", "cli")
            await db.append_message("s1", "user", "async needle")
            return await db.optimize_fts(), await db.vacuum()

    merged, vacuumed = asyncio.run(scenario())
    expected = 0 if target.startswith("postgresql") else 2
    assert (merged, vacuumed) == (expected, expected)


def test_the_drop_in_merges_on_its_write_cadence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = hermes_state.SessionDB(tmp_path / "state.db")
    merges: list[int] = []
    real_optimize = db.optimize_fts

    def counted() -> int:
        merges.append(1)
        return real_optimize()

    monkeypatch.setattr(db, "optimize_fts", counted)
    db._OPTIMIZE_EVERY_N_WRITES = 4
    try:
        db.create_session("s1", "cli")
        for n in range(11):
            db.append_message("s1", "user", f"cadence {n}")
        assert len(merges) == 3  # after writes 4, 8 and 12; the merges are not counted
        monkeypatch.setattr(db, "optimize_fts", lambda: 1 / 0)
        for n in range(4):
            db.append_message("s1", "user", f"still written {n}")  # a failed merge fails no write
        assert db.message_count("s1") == 15
    finally:
        db.close()


def test_the_upstream_probes() -> None:
    locked = sqlite3.OperationalError("no such tokenizer: trigram")
    no_module = sqlite3.OperationalError("no such module: fts5")
    other = sqlite3.OperationalError("no such tokenizer: porter2")
    assert SessionDB._is_trigram_unavailable_error(locked) is True
    assert SessionDB._is_trigram_unavailable_error(no_module) is False
    assert SessionDB._is_fts5_unavailable_error(locked) and SessionDB._is_fts5_unavailable_error(no_module)
    assert SessionDB._is_fts5_unavailable_error(other) is False
    assert SessionDB._OPTIMIZE_EVERY_N_WRITES == 1000


def test_the_drop_in_restores_missing_fts_objects_on_open(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = hermes_state.SessionDB(path)
    db.create_session("s1", "cli")
    db.append_message("s1", "user", "indexed lantern")
    conn = db._conn
    assert conn is not None
    conn.execute("DROP TRIGGER messages_fts_insert")
    conn.execute("DROP TRIGGER messages_fts_trigram_insert")
    db.append_message("s1", "user", "missed lantern 灯塔守护者")  # written while the triggers were gone
    assert len(db.search_messages("lantern")) == 1
    db.close()

    reopened = hermes_state.SessionDB(path)
    try:
        assert len(reopened.search_messages("lantern")) == 2
        assert len(reopened.search_messages("灯塔守护")) == 1
        reopened.append_message("s1", "user", "new lantern")
        assert len(reopened.search_messages("lantern")) == 3
    finally:
        reopened.close()
