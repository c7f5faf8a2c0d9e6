"""The names Hermes imports from ``hermes_state`` exist here, with upstream's meaning."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

import hermes_state

UPSTREAM_NAMES = (
    "SessionDB",
    "AsyncSessionDB",
    "DEFAULT_DB_PATH",
    "SCHEMA_SQL",
    "SCHEMA_VERSION",
    "DEFERRED_INDEX_SQL",
    "MAX_FTS5_QUERY_CHARS",
    "apply_wal_with_fallback",
    "format_session_db_unavailable",
    "get_last_init_error",
    "_set_last_init_error",
    "_wal_fallback_warned_paths",
    "repair_state_db_schema",
    "_db_opens_cleanly",
    "is_malformed_db_error",
    "_repair_attempted_paths",
    "_collect_delegate_child_ids",
    "_delete_delegate_children",
    "_is_background_review_harness_message",
    "_strip_background_review_harness",
    "asyncio",
    "sqlite3",
    "sys",
    "time",
)


def test_every_name_hermes_uses_is_there() -> None:
    missing = [name for name in UPSTREAM_NAMES if not hasattr(hermes_state, name)]
    assert missing == []


def test_constants() -> None:
    assert hermes_state.SCHEMA_VERSION == 17
    assert hermes_state.MAX_FTS5_QUERY_CHARS == 2048
    assert hermes_state.logger.name == "hermes_state"
    assert logging.getLogger("hermes_state") is hermes_state.logger


def test_deferred_indexes_can_be_run_again_on_a_store(tmp_path: Path) -> None:
    hermes_state.SessionDB(tmp_path / "state.db").close()
    conn = sqlite3.connect(str(tmp_path / "state.db"))
    try:
        conn.executescript(hermes_state.DEFERRED_INDEX_SQL)
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    finally:
        conn.close()
    assert {"idx_messages_session_active", "idx_sessions_session_key", "idx_sessions_gateway_peer"} <= indexes


def test_every_drop_in_write_passes_through_execute_write(tmp_path: Path) -> None:
    """Code that wraps ``_execute_write`` (as Hermes' tests do) sees the store's writes."""
    db = hermes_state.SessionDB(tmp_path / "state.db")
    seen: list[object] = []
    original = db._execute_write

    def wrapped(fn: object) -> object:
        seen.append(fn)
        return original(fn)  # type: ignore[arg-type]

    db._execute_write = wrapped  # type: ignore[method-assign]
    try:
        db.create_session("s1", "cli")
        db.update_session_meta("s1", "{}", model="m")
        assert db._execute_write(lambda conn: conn.execute("SELECT 1").fetchone()[0]) == 1
        assert len(seen) == 3
        assert db.get_session("s1")["model"] == "m"  # type: ignore[index]
    finally:
        db.close()


def test_a_factory_patched_over_the_class_still_opens_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hermes' tests replace ``hermes_state.SessionDB`` with a factory of the real class."""
    real = hermes_state.SessionDB
    monkeypatch.setattr(hermes_state, "SessionDB", lambda: real(db_path=tmp_path / "state.db"))
    db = hermes_state.SessionDB()
    try:
        db.create_session("s1", "cli")
        assert db.session_count() == 1
    finally:
        db.close()
