"""Recovering a ``state.db`` whose schema or full-text index is damaged.

Two kinds of damage leave the conversations themselves intact:

* a malformed ``sqlite_master`` (typically a duplicated ``messages_fts`` row), on which
  SQLite refuses every statement, even ``PRAGMA journal_mode``;
* a corrupt FTS5 index, which still reads but makes every message insert fail in the
  index triggers.

:func:`repair_state_db_schema` tries the least destructive cure first and checks the
file after each: rebuilding the FTS indexes in place, then removing duplicated schema
rows, then dropping every ``messages_fts*`` object (the store recreates and refills them
from ``messages`` when it next opens the file). It never changes a ``sessions`` or
``messages`` row, and it copies the file (with its ``-wal``/``-shm``) aside first.
"""

from __future__ import annotations

import datetime
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_store.drop_in import LOGGER_NAME
from hermes_store.drop_in.patchable import through_hermes_state

log = logging.getLogger(LOGGER_NAME)

MALFORMED_MARKERS = ("malformed database schema", "database disk image is malformed")
"""Error texts (lower case) of the damage :func:`repair_state_db_schema` can cure."""

_FTS_TABLES = ("messages_fts", "messages_fts_trigram")

_repair_attempted_paths: set[str] = set()
"""Files whose repair on open was already tried in this process (at most once each)."""
_repair_attempt_lock = threading.Lock()


def is_malformed_db_error(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite saying the schema or the file image is malformed."""
    return isinstance(exc, sqlite3.DatabaseError) and any(m in str(exc).lower() for m in MALFORMED_MARKERS)


def claim_repair_attempt(db_path: str | os.PathLike[str]) -> bool:
    """True the first time a repair of ``db_path`` is asked for in this process, then
    False: a file the repair cannot cure must not be repaired again on every open, and
    two threads must not operate on one file at once."""
    key = str(db_path)
    attempted: set[str] = through_hermes_state("_repair_attempted_paths", _repair_attempted_paths)
    with _repair_attempt_lock:
        if key in attempted:
            return False
        attempted.add(key)
        return True


def _db_opens_cleanly(db_path: str | os.PathLike[str]) -> str | None:
    """``None`` when ``db_path`` is healthy, else what is wrong with it.

    Runs the statement that trips a malformed schema first, then ``integrity_check``, a
    read of ``sessions``, and finally a session and a message inserted and rolled back:
    a corrupt FTS index passes the reads and fails only there. A file without the
    tables yet (being created) counts as healthy.
    """
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode").fetchone()
        problems = [
            str(row[0]) for row in conn.execute("PRAGMA integrity_check") if str(row[0]).lower() != "ok"
        ]
        if problems:
            return "; ".join(problems[:3])
        conn.execute("SELECT COUNT(*) FROM sessions").fetchone()
        return _write_probe(conn)
    except sqlite3.DatabaseError as exc:
        return str(exc)
    finally:
        conn.close()


def _write_probe(conn: sqlite3.Connection) -> str | None:
    """Insert a probe session and message through the FTS triggers, then roll back."""
    probe_id = f"_hermes_fts_health_probe_{time.time_ns()}"
    now = time.time()
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO sessions (id, source, started_at) VALUES (?, ?, ?)", (probe_id, "_health_probe", now)
        )
        conn.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?)",
            (probe_id, "user", "_fts_health_probe", now),
        )
    except sqlite3.OperationalError as exc:
        message = str(exc).lower()
        return None if "no such table" in message or "no such column" in message else str(exc)
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    return None


def backup_db_file(db_path: Path) -> Path | None:
    """Copy ``db_path`` and its ``-wal``/``-shm`` byte for byte to
    ``<name>.malformed-backup-<time>`` beside it; the copy's path, or ``None`` if it failed.
    A byte copy, because a damaged file may not open for a proper backup."""
    stamp = datetime.datetime.now().strftime("%Y%m%d_%H%M%S")
    backup = db_path.with_name(f"{db_path.name}.malformed-backup-{stamp}")
    try:
        shutil.copy2(db_path, backup)
        for suffix in ("-wal", "-shm"):
            sidecar = db_path.with_name(db_path.name + suffix)
            if sidecar.exists():
                shutil.copy2(sidecar, backup.with_name(backup.name + suffix))
    except OSError as exc:
        log.warning("could not back up the damaged database %s: %s", db_path, exc)
        return None
    return backup


def repair_state_db_schema(db_path: str | os.PathLike[str], *, backup: bool = True) -> dict[str, Any]:
    """Repair a damaged ``state.db`` in place (see the module's description).

    Returns ``{"repaired", "strategy", "backup_path", "error"}``: ``strategy`` is
    ``"already_healthy"``, ``"rebuild_fts"``, ``"dedup_schema"``, ``"drop_fts_rebuild"``
    or ``None``. Never raises for a damaged file; failing to cure it is reported in
    ``"error"`` with ``"repaired": False``.
    """
    report: dict[str, Any] = {"repaired": False, "strategy": None, "backup_path": None, "error": None}
    path = Path(db_path)
    if not path.exists():
        report["error"] = f"{path} does not exist"
        return report
    opens_cleanly: Callable[[Path], str | None] = through_hermes_state("_db_opens_cleanly", _db_opens_cleanly)
    if opens_cleanly(path) is None:
        report.update(repaired=True, strategy="already_healthy")
        return report
    if backup:
        copy = backup_db_file(path)
        report["backup_path"] = str(copy) if copy else None
    reason: str | None = None
    for strategy, cure in (
        ("rebuild_fts", _rebuild_fts_in_place),
        ("dedup_schema", _remove_duplicate_schema_rows),
        ("drop_fts_rebuild", _drop_fts_schema),
    ):
        try:
            cure(path)
        except sqlite3.DatabaseError as exc:
            log.warning("state.db repair step %s failed: %s", strategy, exc)
            reason = str(exc)
            continue
        reason = opens_cleanly(path)
        if reason is None:
            report.update(repaired=True, strategy=strategy)
            log.warning("state.db repaired (%s): %s", strategy, path)
            return report
    report["error"] = reason or "the database could not be repaired"
    log.error(
        "state.db could not be repaired automatically: %s (a copy of the damaged file: %s); "
        "restore a backup by hand",
        path,
        report["backup_path"],
    )
    return report


def _rebuild_fts_in_place(path: Path) -> None:
    """FTS5's ``'rebuild'`` on each index: cures a corrupt index, keeps the schema."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        for table in _FTS_TABLES:
            try:
                conn.execute(f"INSERT INTO {table}({table}) VALUES('rebuild')")
            except sqlite3.OperationalError:
                continue  # this index is absent
    finally:
        conn.close()


def _remove_duplicate_schema_rows(path: Path) -> None:
    """Keep the first ``sqlite_master`` row of each (type, name); the index survives."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute("PRAGMA writable_schema=ON")
        duplicates = conn.execute(
            "SELECT type, name, MIN(rowid) FROM sqlite_master GROUP BY type, name HAVING COUNT(*) > 1"
        ).fetchall()
        for kind, name, first in duplicates:
            conn.execute(
                "DELETE FROM sqlite_master WHERE type IS ? AND name IS ? AND rowid <> ?", (kind, name, first)
            )
        conn.execute("PRAGMA writable_schema=OFF")
    finally:
        conn.close()


def _drop_fts_schema(path: Path) -> None:
    """Remove every ``messages_fts*`` object, then ``VACUUM`` away their pages."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute("PRAGMA writable_schema=ON")
        conn.execute("DELETE FROM sqlite_master WHERE name LIKE 'messages_fts%'")
        conn.execute("PRAGMA writable_schema=OFF")
        conn.execute("VACUUM")
    finally:
        conn.close()
