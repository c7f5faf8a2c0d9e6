"""Hermes Agent runs on this store with no code of its own.

Hermes imports ``SessionDB``, ``DEFAULT_DB_PATH``, ``SCHEMA_VERSION`` and ``SCHEMA_SQL``
from ``hermes_state``; its tests patch ``hermes_state.SessionDB``,
``hermes_state.DEFAULT_DB_PATH`` and ``SessionDB._encode_content``. Each of those must
reach what the store really uses.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import hermes_state
import hermes_store
import hermes_store.hermes_state as drop_in


def test_top_level_hermes_state_is_the_drop_in_module() -> None:
    assert hermes_state is drop_in
    assert issubclass(hermes_state.SessionDB, hermes_store.SessionDB)
    assert hermes_state.SCHEMA_VERSION == 17
    assert isinstance(hermes_state.DEFAULT_DB_PATH, Path)
    assert hermes_state.DEFAULT_DB_PATH.name == "state.db"


def test_schema_sql_declares_every_live_column(tmp_path: Path) -> None:
    db = hermes_state.SessionDB(db_path=tmp_path / "state.db")
    try:
        declared = hermes_state.SessionDB._parse_schema_columns(hermes_state.SCHEMA_SQL)
        assert set(declared) >= {"sessions", "messages", "state_meta", "schema_version"}
        conn = db._conn
        assert conn is not None
        for table, columns in declared.items():
            live = {row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')}
            assert set(columns) == live, table
    finally:
        db.close()


def test_patched_encode_content_is_what_the_write_path_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hermes' gateway test injects a failure on the second encode of a rewrite."""
    SessionDB = hermes_state.SessionDB
    db = SessionDB(db_path=tmp_path / "state.db")
    try:
        db.create_session(session_id="s", source="cli")
        db.append_message(session_id="s", role="user", content="before user")
        db.append_message(session_id="s", role="assistant", content="before assistant")
        real_encode = SessionDB._encode_content
        calls = {"n": 0}

        def flaky_encode(cls: Any, content: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == 2:
                raise RuntimeError("simulated storage failure")
            return real_encode.__func__(cls, content)  # type: ignore[attr-defined]

        monkeypatch.setattr(SessionDB, "_encode_content", classmethod(flaky_encode))
        replacement = [{"role": "user", "content": "after user"}, {"role": "assistant", "content": "after"}]
        with pytest.raises(RuntimeError, match="simulated storage failure"):
            db.replace_messages("s", replacement)
        assert calls["n"] == 2
        assert [m["content"] for m in db.get_messages_as_conversation("s")] == [
            "before user",
            "before assistant",
        ]
        calls["n"] = 1
        with pytest.raises(RuntimeError):
            db.append_message(session_id="s", role="user", content="lost")
        assert db.message_count("s") == 2
    finally:
        db.close()


def test_rebinding_default_db_path_redirects_sessiondb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "patched" / "state.db"
    monkeypatch.setattr(hermes_state, "DEFAULT_DB_PATH", target)
    hermes_state.SessionDB().close()
    assert target.exists()


def test_default_path_follows_hermes_home_set_after_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "profile"))
    monkeypatch.delenv("HERMES_STORE_URL", raising=False)
    hermes_state.SessionDB().close()
    with sqlite3.connect(tmp_path / "profile" / "state.db") as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchone() == (hermes_state.SCHEMA_VERSION,)


def test_patching_sessiondb_on_the_module_is_seen_by_importers(monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel = object()
    monkeypatch.setattr("hermes_state.SessionDB", lambda: sentinel)
    from hermes_state import SessionDB

    assert SessionDB() is sentinel
