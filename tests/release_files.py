"""Files written by upstream Hermes release 0.20.3 (schema 26), for the tests that check
the store reads them right and never damages them.

Upstream's real store is extracted from the mirror (``benchmarks/upstream.py``) and run in
a child process: its module is named ``hermes_state`` too, and it imports its sibling
modules by name. :func:`run_release` runs a script there with ``db`` bound to upstream's
``SessionDB`` on a file and prints what the script returns as JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from support import bench_upstream

_FOLDER: list[Path] = []


def release_folder() -> Path:
    """Upstream 0.20.3's store in a temporary folder (once per process); skips without the mirror."""
    if not _FOLDER:
        folder = bench_upstream().release_folder()
        if folder is None:
            pytest.skip("the mirror of upstream Hermes 0.20.3 is not here; cannot run it")
        _FOLDER.append(folder)
    return _FOLDER[0]


def run_release(path: Path, script: str, home: Path | None = None) -> Any:
    """Run ``script`` (Python; ``db`` is upstream 0.20.3's ``SessionDB`` on ``path``, its
    last line ``result = …``) in a child process and return ``result`` decoded from JSON."""
    folder = release_folder()
    program = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(folder)!r})\n"
        "from pathlib import Path\n"
        "import hermes_state\n"
        f"db = hermes_state.SessionDB(Path({str(path)!r}))\n"
        "result = None\n"
        f"{textwrap.dedent(script)}\n"
        "db.close()\n"
        "print('RESULT=' + json.dumps(result))\n"
    )
    env = {**os.environ, "HERMES_HOME": str(home or path.parent / "hermes-home")}
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=120, cwd=folder
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = [text for text in done.stdout.splitlines() if text.startswith("RESULT=")][-1]
    return json.loads(line[len("RESULT=") :])


BUILD = """
db.create_session("shared_a", "cli", model="m1", system_prompt="You are Hermes.")
db.create_session("shared_b", "telegram", model="m1", system_prompt="You are Hermes.")
db.create_session("own", "cli", system_prompt="Only mine.")
db.create_session("hidden", "cli", system_prompt="Hidden prompt.")
db.create_session("pinned", "cli")
for sid in ("shared_a", "shared_b", "own", "hidden", "pinned"):
    db.append_message(sid, role="user", content=f"hello docker from {sid} 部署测试")
    db.append_message(sid, role="assistant", content="Run it.", tool_calls=[
        {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}])
    db.append_message(sid, role="tool", content="giraffe output ツール出力", tool_call_id="c1",
                      tool_name="terminal")
db.set_session_hidden("hidden", True)
db.set_session_pinned("pinned", True)
db.set_session_title("own", "My own")
result = {"prompts": {sid: (db.get_session(sid) or {}).get("system_prompt")
                      for sid in ("shared_a", "shared_b", "own", "hidden", "pinned")}}
"""


def build_release_file(path: Path) -> dict[str, Any]:
    """A state.db written by upstream 0.20.3 (prompts shared and per session, a hidden and
    a pinned session, tool rows), opened twice as Hermes does (its FTS layout stamp lands on
    the second open); returns what upstream itself reads of the prompts."""
    built: dict[str, Any] = run_release(path, BUILD)
    run_release(path, "result = 1")
    return built


def copy_of(source: Path, folder: Path, name: str = "state.db") -> Path:
    """A copy of the (rollback-journal) file ``source`` in ``folder``."""
    target = folder / name
    shutil.copyfile(source, target)
    return target


def fts_integrity(path: Path) -> dict[str, str]:
    """FTS5's own ``integrity-check`` of each full-text table of ``path``: ``ok`` or the error."""
    outcome = {}
    with closing(sqlite3.connect(path)) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'"
            )
        ]
        for table in tables:
            try:
                conn.execute(f"INSERT INTO {table}({table}) VALUES('integrity-check')")
                outcome[table] = "ok"
            except sqlite3.DatabaseError as exc:
                outcome[table] = str(exc)
    return outcome


def journal_mode(path: Path) -> str:
    with closing(sqlite3.connect(path)) as conn:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()


def master(path: Path, kind: str) -> dict[str, str]:
    with closing(sqlite3.connect(path)) as conn:
        return {
            name: sql
            for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = ?", (kind,))
        }


def _tool_prefix(row: str) -> str:
    prefix = f"substr(COALESCE({row}.content, ''), 1, 8192)"
    return f"CASE WHEN {row}.role = 'tool' THEN {prefix} ELSE {row}.content END"


def _layout_3_words() -> list[str]:
    """``messages_fts`` over a view that keeps only a prefix of tool rows, with triggers that
    index the same projection (the shape of upstream's newest layout)."""
    old, new = _tool_prefix("old"), _tool_prefix("new")
    delete = (
        "INSERT INTO messages_fts(messages_fts, rowid, content, tool_name, tool_calls) "
        f"VALUES ('delete', old.id, {old}, old.tool_name, old.tool_calls);"
    )
    insert = (
        "INSERT INTO messages_fts(rowid, content, tool_name, tool_calls) "
        f"VALUES (new.id, {new}, new.tool_name, new.tool_calls);"
    )
    return [
        "DROP TRIGGER messages_fts_insert",
        "DROP TRIGGER messages_fts_delete",
        "DROP TRIGGER messages_fts_update",
        "DROP TABLE messages_fts",
        f"CREATE VIEW messages_fts_src AS SELECT id, {_tool_prefix('messages')} AS content, tool_name, "
        "tool_calls FROM messages",
        "CREATE VIRTUAL TABLE messages_fts USING fts5(content, tool_name, tool_calls, "
        "content='messages_fts_src', content_rowid='id')",
        f"CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN {insert} END",
        f"CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN {delete} END",
        "CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, tool_name, tool_calls, role ON messages "
        f"BEGIN {delete} {insert} END",
        "INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')",
    ]


def _layout_2_trigrams() -> list[str]:
    """A trigram index of ``content`` and ``tool_name`` only, leaving out tool rows and cron
    sessions (upstream's schema 29-30 trigram shape)."""
    indexed = "{row}.role <> 'tool' AND (SELECT source FROM sessions WHERE id = {row}.session_id) <> 'cron'"
    delete = (
        "INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content, tool_name) "
        "SELECT 'delete', old.id, old.content, old.tool_name WHERE " + indexed.format(row="old") + ";"
    )
    insert = (
        "INSERT INTO messages_fts_trigram(rowid, content, tool_name) "
        "SELECT new.id, new.content, new.tool_name WHERE " + indexed.format(row="new") + ";"
    )
    return [
        "DROP TRIGGER messages_fts_trigram_insert",
        "DROP TRIGGER messages_fts_trigram_delete",
        "DROP TRIGGER messages_fts_trigram_update",
        "DROP TABLE messages_fts_trigram",
        "DROP VIEW messages_fts_trigram_src",
        "CREATE VIEW messages_fts_trigram_src AS SELECT m.id, m.content, m.tool_name FROM messages m "
        "JOIN sessions s ON s.id = m.session_id WHERE m.role <> 'tool' AND s.source <> 'cron'",
        "CREATE VIRTUAL TABLE messages_fts_trigram USING fts5(content, tool_name, "
        "content='messages_fts_trigram_src', content_rowid='id', tokenize='trigram')",
        f"CREATE TRIGGER messages_fts_trigram_insert AFTER INSERT ON messages BEGIN {insert} END",
        f"CREATE TRIGGER messages_fts_trigram_delete AFTER DELETE ON messages BEGIN {delete} END",
        "CREATE TRIGGER messages_fts_trigram_update AFTER UPDATE OF content, tool_name, role ON messages "
        f"BEGIN {delete} {insert} END",
        "INSERT INTO messages_fts_trigram(messages_fts_trigram) VALUES ('rebuild')",
    ]


SCHEMA_30_ADDITIONS = [
    "ALTER TABLE sessions ADD COLUMN created_source TEXT",
    "ALTER TABLE sessions ADD COLUMN compression_recovery_deadline REAL",
    "ALTER TABLE sessions ADD COLUMN compression_overload_streak INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE sessions ADD COLUMN transport_profile TEXT",
    "ALTER TABLE sessions ADD COLUMN tool_names TEXT",
    "ALTER TABLE messages ADD COLUMN _compressed_summary INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE messages ADD COLUMN display_identity BLOB",
    "ALTER TABLE messages ADD COLUMN display_order INTEGER",
    "CREATE TABLE conversation_generations (source TEXT NOT NULL, session_key TEXT NOT NULL, "
    "generation INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (source, session_key))",
    "CREATE TABLE gateway_heartbeats (backend_id TEXT PRIMARY KEY, pid INTEGER NOT NULL, "
    "started_at REAL NOT NULL, last_heartbeat REAL NOT NULL, profile TEXT NOT NULL DEFAULT '', "
    "host TEXT NOT NULL DEFAULT '')",
    # A display-order trigger of the kind schema 30 keeps on messages: writers that do not
    # know the column still get it filled.
    "CREATE TRIGGER messages_display_order_insert AFTER INSERT ON messages WHEN new.display_order IS NULL "
    "BEGIN UPDATE messages SET display_order = new.id WHERE id = new.id; END",
    "UPDATE messages SET display_order = id",
    "UPDATE schema_version SET version = 30",
    "INSERT INTO state_meta (key, value) VALUES ('fts_storage_version', '3') "
    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
]


def as_schema_30(path: Path) -> None:
    """Turn a file upstream 0.20.3 wrote into one of schema 30's shape, as far as upstream's
    public code shows it: the newer columns and tables, a display-order trigger, and the
    external-content layout 3 (a tool-row prefix projection for words, a trigram index
    without tool calls, tool rows or cron sessions)."""
    with closing(sqlite3.connect(path)) as conn:
        for statement in [*SCHEMA_30_ADDITIONS, *_layout_3_words(), *_layout_2_trigrams()]:
            conn.execute(statement)
        conn.commit()
