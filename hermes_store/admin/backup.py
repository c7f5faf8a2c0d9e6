"""Online backups of a SQLite store through SQLite's backup API.

The copy is consistent while other processes keep writing: the source connection
opens a read transaction *before* the first page is copied and holds it to the end,
so every step reads the same WAL snapshot (writers are never blocked in WAL mode, and
the backup never restarts). Everything committed before the backup started is in the
copy. Pages are copied in steps so a progress bar can follow; the copy is written to a
temporary file beside the destination, checked, switched to a self-contained
rollback-journal file, and renamed into place only when complete.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import orm

from hermes_store.db.engine import BUSY_TIMEOUT_S, FILE_MODE, create_engine
from hermes_store.repository import facts

DEFAULT_PAGES_PER_STEP = 1024
_OPEN_TIMEOUT_S = max(30.0, BUSY_TIMEOUT_S)


class BackupFailed(ValueError):
    """The backup could not be taken or its copy failed verification."""


@dataclass(frozen=True)
class BackupResult:
    """What a finished backup holds."""

    destination: Path
    pages: int
    size: int
    messages: int | None
    sessions: int | None
    integrity: str | None


def _create_private(path: Path) -> None:
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)
    os.close(os.open(path, flags, FILE_MODE))


def backup_sqlite(
    source: Path,
    destination: Path,
    *,
    pages_per_step: int = DEFAULT_PAGES_PER_STEP,
    verify: bool = True,
    overwrite: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> BackupResult:
    """Copy the SQLite database ``source`` to ``destination`` while writers keep writing.

    ``on_progress(copied_pages, total_pages)`` is called after each step. With
    ``verify`` the copy must pass ``PRAGMA integrity_check``. The copy is owner-only
    (0600) and uses ``journal_mode=DELETE`` so it is a single self-contained file.

    :raises BackupFailed: if ``source`` is missing, ``destination`` exists (without
        ``overwrite``) or the copy is damaged.
    """
    if not source.is_file():
        raise BackupFailed(f"no database at {source}: nothing to back up")
    if destination.exists() and not overwrite:
        raise BackupFailed(f"{destination} already exists (use --force to replace it)")
    if destination.resolve() == source.resolve():
        raise BackupFailed("the backup must go to another file than the database itself")
    if not destination.parent.is_dir():
        raise BackupFailed(f"directory {destination.parent} does not exist")
    partial = destination.with_name(f".{destination.name}.partial-{os.getpid()}")
    partial.unlink(missing_ok=True)
    _create_private(partial)
    try:
        pages, integrity = _copy(source, partial, pages_per_step, verify, on_progress)
        messages, sessions = _counts(partial)
        os.replace(partial, destination)
    except BaseException:
        for leftover in (partial, Path(f"{partial}-journal"), Path(f"{partial}-wal"), Path(f"{partial}-shm")):
            leftover.unlink(missing_ok=True)
        raise
    size = destination.stat().st_size
    return BackupResult(destination, pages, size, messages, sessions, integrity)


def _counts(copy: Path) -> tuple[int | None, int | None]:
    """How many messages and sessions the copy holds (``None``: no such table in it)."""
    engine = create_engine(copy, prepare=False, poolclass=sa.pool.NullPool)
    try:
        with orm.Session(engine) as db:
            return facts.message_total(db), facts.counts(db)["sessions"]
    finally:
        engine.dispose()


def _copy(
    source: Path,
    partial: Path,
    pages_per_step: int,
    verify: bool,
    on_progress: Callable[[int, int], None] | None,
) -> tuple[int, str | None]:
    """Copy ``source`` into ``partial`` in steps; returns the pages copied and the check's verdict."""
    # A URI, for mode=rw (never create the source); as_uri() percent-encodes the path, so
    # '#', '?' and '%' in it stay part of the file name instead of ending or escaping it.
    uri = f"{source.absolute().as_uri()}?mode=rw"
    src = sqlite3.connect(uri, uri=True, timeout=_OPEN_TIMEOUT_S, isolation_level=None)
    dst = sqlite3.connect(str(partial), isolation_level=None)
    total_pages = 0
    try:
        # Pin one snapshot for the whole copy: a read transaction begun now.
        src.execute("BEGIN")
        src.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()

        def progress(_status: int, remaining: int, total: int) -> None:
            nonlocal total_pages
            total_pages = total
            if on_progress is not None:
                on_progress(total - remaining, total)

        src.backup(dst, pages=max(1, pages_per_step), progress=progress)
        with contextlib.suppress(sqlite3.Error):
            src.execute("COMMIT")
        dst.execute("PRAGMA journal_mode=DELETE")
        integrity: str | None = None
        if verify:
            rows = [str(row[0]) for row in dst.execute("PRAGMA integrity_check").fetchall()]
            integrity = "ok" if rows == ["ok"] else "; ".join(rows[:5])
            if integrity != "ok":
                raise BackupFailed(f"the copy failed integrity_check: {integrity}")
        return total_pages, integrity
    finally:
        dst.close()
        src.close()
