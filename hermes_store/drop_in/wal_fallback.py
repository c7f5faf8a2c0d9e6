"""WAL on a plain ``sqlite3`` connection, with the rollback journal where WAL cannot work.

Network and some FUSE file systems refuse WAL (``locking protocol``, ``not authorized``).
There a database still works in ``journal_mode=DELETE``, with less concurrency, so
:func:`apply_wal_with_fallback` switches to it and warns once per database label and
process. Any other error is raised: a transient I/O error must not move one process to
the rollback journal while its siblings stay in WAL, and a file that is already WAL on
disk is never downgraded.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import sys
import threading
from typing import Literal

from hermes_store.drop_in import LOGGER_NAME

log = logging.getLogger(LOGGER_NAME)

WAL_INCOMPATIBILITY_MARKERS = ("locking protocol", "not authorized")
"""Error texts (lower case) by which SQLite says this file system cannot do WAL."""

_wal_fallback_warned_paths: set[str] = set()
"""Database labels already warned about in this process (tests clear it)."""
_warned_lock = threading.Lock()


def apply_wal_with_fallback(
    conn: sqlite3.Connection, *, db_label: str = "state.db"
) -> Literal["wal", "delete"]:
    """Put ``conn``'s database in WAL mode; return the journal mode it ends up in.

    A database already in WAL is left as it is (setting the mode again could disturb
    other connections' ``-wal``/``-shm`` files). Where the file system refuses WAL, the
    database falls back to ``journal_mode=DELETE`` with one warning per ``db_label`` per
    process, unless the file on disk is already WAL, which is never downgraded (the
    error is raised instead). Other errors propagate. On macOS the checkpoint also
    gets a full-fsync barrier.
    """
    if _current_journal_mode(conn) == "wal":
        _apply_macos_checkpoint_barrier(conn)
        return "wal"
    try:
        conn.execute("PRAGMA journal_mode=WAL")
    except sqlite3.OperationalError as exc:
        if not any(marker in str(exc).lower() for marker in WAL_INCOMPATIBILITY_MARKERS):
            raise
        if _current_journal_mode(conn) == "wal":
            raise  # another process runs this file in WAL: mixing journal modes corrupts it
        _warn_once(db_label, exc)
        conn.execute("PRAGMA journal_mode=DELETE")
        return "delete"
    _apply_macos_checkpoint_barrier(conn)
    return "wal"


def _current_journal_mode(conn: sqlite3.Connection) -> str | None:
    """The journal mode ``conn`` reports (lower case), or ``None`` when it cannot say."""
    try:
        row = conn.execute("PRAGMA journal_mode").fetchone()
    except sqlite3.OperationalError:
        return None
    if not row or row[0] is None:
        return None
    mode = row[0].decode("ascii", "replace") if isinstance(row[0], bytes) else str(row[0])
    return mode.strip().lower()


def _apply_macos_checkpoint_barrier(conn: sqlite3.Connection) -> None:
    """On macOS, make WAL checkpoints use ``F_FULLFSYNC``; elsewhere nothing.

    A plain ``fsync`` on macOS does not guarantee the data reached the disk, so a
    checkpoint interrupted by a system shutdown could leave a malformed file. The
    barrier costs little because it applies only when frames move into the main file.
    """
    if sys.platform != "darwin":
        return
    with contextlib.suppress(sqlite3.OperationalError):  # an older SQLite still works without it
        conn.execute("PRAGMA checkpoint_fullfsync=1")


def _warn_once(db_label: str, exc: Exception) -> None:
    """Warn about the fallback once per ``db_label``: some callers open a connection for
    every operation and would otherwise fill the log."""
    with _warned_lock:
        if db_label in _wal_fallback_warned_paths:
            return
        _wal_fallback_warned_paths.add(db_label)
    log.warning(
        "%s: this file system does not support WAL (%s); using journal_mode=DELETE "
        "instead (readers and writers block each other more, but it works on NFS, SMB "
        "and FUSE mounts; see https://www.sqlite.org/wal.html). Logged once per database "
        "per process.",
        db_label,
        exc,
    )
