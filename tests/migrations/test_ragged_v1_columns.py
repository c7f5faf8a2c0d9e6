"""A legacy file can lack even version-1 columns (upstream added missing columns on every
open); adoption must add them, or every query naming them fails after the upgrade."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hermes_store import SessionDB
from hermes_store.schema.legacy import HEAD_VERSION

HAND_MADE_V10 = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (10);
CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, started_at REAL, ended_at REAL,
    title TEXT, parent_session_id TEXT, message_count INTEGER DEFAULT 0,
    tool_call_count INTEGER DEFAULT 0, api_call_count INTEGER DEFAULT 0);
CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, timestamp REAL NOT NULL,
    role TEXT NOT NULL, content TEXT, tool_name TEXT, tool_calls TEXT, tool_call_id TEXT,
    token_count INTEGER, finish_reason TEXT, reasoning TEXT, reasoning_content TEXT,
    reasoning_details TEXT, codex_reasoning_items TEXT, codex_message_items TEXT);
CREATE VIRTUAL TABLE messages_fts USING fts5(content, content=messages, content_rowid=id);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
"""


def test_hand_made_v10_without_v1_columns_is_completed_and_searchable(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    raw = sqlite3.connect(path)
    raw.executescript(HAND_MADE_V10)
    raw.execute("INSERT INTO sessions (id, source, started_at) VALUES ('s1', 'cli', 1000.0)")
    raw.execute(
        "INSERT INTO messages (session_id, timestamp, role, content, tool_name, tool_calls) "
        "VALUES ('s1', 1001.0, 'assistant', '', 'LEGACYTOOL', '{\"q\": \"LEGACYARG\"}')"
    )
    raw.commit()
    raw.close()

    db = SessionDB(path)
    assert [hit["id"] for hit in db.search_messages("LEGACYTOOL")] == [1]
    assert [hit["id"] for hit in db.search_messages("LEGACYARG")] == [1]
    row = db.get_session("s1")
    assert row is not None
    assert (row["model"], row["input_tokens"], row["started_at"]) == (None, 0, 1000.0)
    assert [s["id"] for s in db.list_sessions_rich()] == ["s1"]
    db.update_token_counts("s1", input_tokens=5, model="m")
    assert db.get_session("s1")["model"] == "m"  # type: ignore[index]
    assert db._conn is not None
    assert db._conn.execute("SELECT version FROM schema_version").fetchone()[0] == HEAD_VERSION
    db.close()
