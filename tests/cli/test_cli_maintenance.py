"""``info``, ``prune``, ``vacuum``, ``doctor`` and ``backup`` on a real store."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from click.testing import Result

from hermes_store.api.session_db import SessionDB

Invoke = Callable[..., Result]


def _sql(path: Path, statement: str, *params: object) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        return connection.execute(statement, params).fetchall()
    finally:
        connection.close()


# --- info -------------------------------------------------------------------------------------


def test_info_json(invoke: Invoke, seeded_db: Path) -> None:
    facts = json.loads(invoke("info", "--json").output)
    assert facts["path"] == str(seeded_db)
    assert facts["backend"] == "sqlite+pysqlite"
    assert (facts["revision"], facts["schema_version"], facts["at_head"]) == ("0020", 17, True)
    assert (facts["sessions"], facts["messages"], facts["live_sessions"]) == (8, 17, 3)
    assert facts["journal_mode"] == "wal"
    assert facts["size_bytes"] == seeded_db.stat().st_size
    assert facts["sources"] == {"cli": 6, "telegram": 1, "tui": 1}


def test_info_human(invoke: Invoke) -> None:
    output = invoke("info").output
    for label in (
        "Database",
        "Backend",
        "Revision",
        "schema_version",
        "Size",
        "WAL",
        "Journal mode",
        "Messages",
    ):
        assert label in output
    assert "0020 (head)" in output


def test_info_does_not_upgrade_a_legacy_database(invoke: Invoke, legacy_v5: Path) -> None:
    facts = json.loads(invoke("info", "--json", db=legacy_v5).output)
    assert (facts["revision"], facts["schema_version"]) == (None, 5)
    assert _sql(legacy_v5, "SELECT version FROM schema_version") == [(5,)]


# --- prune / vacuum ---------------------------------------------------------------------------


def test_prune_dry_run_then_prune(invoke: Invoke, seeded_db: Path) -> None:
    dry = json.loads(invoke("prune", "--older-than", "90", "--dry-run", "--json").output)
    assert dry == {"dry_run": True, "count": 1, "sessions": ["zeta-ancient"]}
    assert "Would prune 1 session(s)" in invoke("prune", "--older-than", "90", "--dry-run").output
    assert _sql(seeded_db, "SELECT COUNT(*) FROM sessions") == [(8,)]
    assert "Pruned 1 session(s)" in invoke("prune", "--older-than", "90").output
    assert _sql(seeded_db, "SELECT id FROM sessions WHERE id = 'zeta-ancient'") == []
    assert (
        json.loads(invoke("prune", "--older-than", "1", "--source", "telegram", "--json").output)["count"]
        == 0
    )


def test_prune_requires_older_than(invoke: Invoke) -> None:
    invoke("prune", status=2)


def test_vacuum(invoke: Invoke, seeded_db: Path) -> None:
    invoke("prune", "--older-than", "0")
    sizes = json.loads(invoke("vacuum", "--json").output)
    assert sizes["size_after"] <= sizes["size_before"]
    assert _sql(seeded_db, "PRAGMA integrity_check") == [("ok",)]


# --- doctor ------------------------------------------------------------------------------------


def test_doctor_healthy_store(invoke: Invoke) -> None:
    report = json.loads(invoke("doctor", "--json").output)
    assert report["ok"] is True
    statuses = {finding["check"]: finding["status"] for finding in report["findings"]}
    assert statuses == {
        "schema": "ok",
        "integrity": "ok",
        "fts:messages_fts": "ok",
        "fts:messages_fts_trigram": "ok",
        "orphan-messages": "ok",
        "orphan-sessions": "ok",
        "counters": "ok",
        "wal": "ok",
    }


def _break(path: Path) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA foreign_keys=OFF")
        connection.execute("DELETE FROM messages_fts WHERE rowid IN (SELECT MIN(id) FROM messages)")
        connection.execute("INSERT INTO messages_fts_trigram(rowid, content) VALUES (99999, 'ghost row')")
        connection.execute("DROP TRIGGER messages_fts_insert")
        connection.execute(
            "UPDATE sessions SET message_count = 42, tool_call_count = 7 WHERE id = 'gamma-photo'"
        )
        connection.execute("UPDATE sessions SET parent_session_id = 'vanished' WHERE id = 'epsilon-plan-b'")
        connection.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) "
            "VALUES ('lost-session', 'user', 'orphan', 1.0)"
        )
    finally:
        connection.close()


def test_doctor_finds_and_fixes_problems(invoke: Invoke, seeded_db: Path) -> None:
    _break(seeded_db)
    broken = invoke("doctor", status=1)
    assert "problem(s) found; run 'hermes-store doctor --fix'" in broken.output
    report = json.loads(invoke("doctor", "--json", status=1).output)
    failing = {f["check"] for f in report["findings"] if f["status"] == "fail"}
    assert failing == {
        "fts:messages_fts",
        "fts:messages_fts_trigram",
        "orphan-messages",
        "orphan-sessions",
        "counters",
    }
    fixed = json.loads(invoke("doctor", "--fix", "--json").output)
    assert fixed["ok"] is True
    assert {f["check"] for f in fixed["findings"] if f["status"] == "fixed"} == failing
    assert any("rebuilt messages_fts" in line for line in fixed["repairs"])
    assert json.loads(invoke("doctor", "--json").output)["ok"] is True
    # The repaired index and trigger work: a new message is found by search.
    with SessionDB(seeded_db) as db:
        assert db.get_session("gamma-photo")["message_count"] == 2  # type: ignore[index]
        assert db.get_session("epsilon-plan-b")["parent_session_id"] is None  # type: ignore[index]
        assert db.get_session("lost-session")["message_count"] == 1  # type: ignore[index]
        db.append_message("gamma-photo", "user", "zebracorn appears")
        assert [hit["session_id"] for hit in db.search_messages("zebracorn")] == ["gamma-photo"]
        assert db.search_messages("How do I deploy")[0]["session_id"] == "alpha-deploy"


# --- backup -------------------------------------------------------------------------------------


def test_backup_copies_a_consistent_private_file(invoke: Invoke, seeded_db: Path, tmp_path: Path) -> None:
    target = tmp_path / "copy.db"
    summary = json.loads(invoke("backup", str(target), "--pages", "2", "--json").output)
    assert summary["integrity"] == "ok" and summary["messages"] == 17 and summary["sessions"] == 8
    assert target.stat().st_mode & 0o777 == 0o600
    assert _sql(target, "PRAGMA journal_mode") == [("delete",)]
    assert _sql(target, "SELECT COUNT(*) FROM messages") == [(17,)]
    again = invoke("backup", str(target), status=1)
    assert "already exists (use --force" in again.output
    invoke("backup", str(target), "--force")
    assert not list(tmp_path.glob(".copy.db.partial-*"))


def test_backup_refuses_a_server_url(invoke: Invoke) -> None:
    result = invoke("--url", "postgresql+psycopg://u@localhost/db", "backup", "x.db", raw=True, status=1)
    assert "works on a SQLite database file" in result.output


WRITER = """
import sys
from hermes_store.api.session_db import SessionDB
db = SessionDB(sys.argv[1])
db.create_session("writer", "cli")
n = 0
while True:
    db.append_message("writer", "user", "written while backing up %d " % n + "x" * 200)
    n += 1
"""


def _grow(path: Path, rows: int) -> None:
    connection = sqlite3.connect(path)
    try:
        with connection:
            connection.executemany(
                "INSERT INTO messages (session_id, role, content, timestamp) "
                "VALUES ('alpha-deploy', 'user', ?, ?)",
                [(f"filler {n} " + "lorem ipsum " * 80, 1.0 + n) for n in range(rows)],
            )
            connection.execute(
                "UPDATE sessions SET message_count = message_count + ? WHERE id = 'alpha-deploy'", (rows,)
            )
    finally:
        connection.close()


def _max_id(path: Path) -> int:
    return int(_sql(path, "SELECT MAX(id) FROM messages")[0][0] or 0)  # type: ignore[call-overload]


def test_backup_while_another_process_writes(invoke: Invoke, seeded_db: Path, tmp_path: Path) -> None:
    _grow(seeded_db, 3000)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(seeded_db)])
    try:
        start = _max_id(seeded_db)
        deadline = time.time() + 20
        while _max_id(seeded_db) < start + 20:
            assert writer.poll() is None, "the writer process died"
            assert time.time() < deadline, "the writer never wrote"
            time.sleep(0.05)
        committed_before = _max_id(seeded_db)
        target = tmp_path / "online.db"
        summary = json.loads(invoke("backup", str(target), "--pages", "8", "--json").output)
        written_after = _max_id(seeded_db)
    finally:
        writer.terminate()
        writer.wait(timeout=10)
    assert written_after > committed_before, "the writer should have kept writing during the backup"
    assert summary["integrity"] == "ok"
    assert _sql(target, "PRAGMA integrity_check") == [("ok",)]
    wanted = {row[0] for row in _sql(seeded_db, "SELECT id FROM messages WHERE id <= ?", committed_before)}
    copied = {row[0] for row in _sql(target, "SELECT id FROM messages")}
    assert wanted <= copied
    assert summary["messages"] == len(copied)
    # The copy is a working store.
    assert json.loads(invoke("doctor", "--json", db=target).output)["ok"] is True
