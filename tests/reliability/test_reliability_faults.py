"""Faults: read-only storage, a full disk, damaged files, missing search support, a lock
held too long.

Each fault must surface as its own ``StoreError`` subclass whose message tells the user
what to do, and must not cost any data already stored: after the fault is removed the
file passes every check of ``verify_store`` with every message written before it.

How the faults are made here (all real, none mocked):

* read-only file / directory — ``chattr +i`` (root ignores permission bits, not the
  immutable flag); read-only file system — a tmpfs remounted ``ro``;
* full disk — a 2 MiB tmpfs filled with a filler file; and, needing no privileges,
  SQLite's ``max_page_count`` on the store's own connections;
* damaged files — random bytes, a text file, a truncated database, a zeroed header,
  garbage over a third of the pages;
* no FTS5 / no trigram tokenizer — a database whose index declarations name a module or
  tokenizer this SQLite does not have (edited through ``writable_schema``), which is what
  a SQLite build without them reports;
* a lock beyond the retry budget — another process holding ``BEGIN IMMEDIATE``.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from _faults import SmallFs, release_immutable
from _harness import Acks, message_text, spawn, verify_store
from sqlalchemy import event

from hermes_store import (
    CorruptDatabase,
    ReadOnlyStore,
    SearchUnavailable,
    StorageFull,
    StoreError,
    UnsafePath,
    WriteConflict,
)
from hermes_store.api.session_db import SessionDB
from hermes_store.db.engine import create_engine

SESSION = "fault-session"


def populate(db: Path, count: int = 20, size: int = 240, seed: int = 1) -> Acks:
    """Store ``count`` tagged messages and return them as acknowledged."""
    rng = random.Random(seed)
    acks = Acks()
    with SessionDB(db) as store:
        store.create_session(SESSION, "cli")
        for n in range(count):
            tag = f"f{seed}x{n}"
            acks.messages[tag] = (
                store.append_message(SESSION, "user", message_text(tag, rng, size)),
                SESSION,
                0,
            )
    return acks


def append_acked(store: SessionDB, acks: Acks, tag: str, size: int = 240) -> int:
    message_id = store.append_message(SESSION, "user", message_text(tag, random.Random(tag), size))
    acks.messages[tag] = (message_id, SESSION, 0)
    return message_id


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_tells_what_to_do(error: BaseException, *hints: str) -> None:
    text = str(error).lower()
    assert any(hint in text for hint in hints), f"{type(error).__name__} gives no advice: {error}"


# --- read-only -------------------------------------------------------------------------------


def check_read_only(db: Path, acks: Acks) -> None:
    """Opening may refuse with ReadOnlyStore; if it opens, reads work and writes refuse."""
    try:
        store = SessionDB(db)
    except ReadOnlyStore as exc:
        assert_tells_what_to_do(exc, "permission", "writable")
        return
    try:
        assert len(store.get_messages(SESSION)) == len(acks.messages)
        assert store.search_messages("payload", limit=100)
        writes: list[Callable[[], object]] = [
            lambda: store.append_message(SESSION, "user", "not stored"),
            lambda: store.create_session("another", "cli"),
            lambda: store.set_session_title(SESSION, "a title"),
            lambda: store.update_token_counts(SESSION, input_tokens=5),
        ]
        for write in writes:
            with pytest.raises(ReadOnlyStore) as info:
                write()
            assert_tells_what_to_do(info.value, "permission", "writable")
    finally:
        store.close()


def test_read_only_database_file(tmp_path: Path, immutable: Callable[[Path], None]) -> None:
    db = tmp_path / "state.db"
    acks = populate(db)
    before = digest(db)
    immutable(db)
    check_read_only(db, acks)
    release_immutable(db)
    assert digest(db) == before
    verify_store(db, acks)
    with SessionDB(db) as store:
        append_acked(store, acks, "after-read-only")
    verify_store(db, acks)


def test_read_only_directory(tmp_path: Path, immutable: Callable[[Path], None]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = home / "state.db"
    acks = populate(db)
    immutable(home)
    check_read_only(db, acks)
    release_immutable(home)
    verify_store(db, acks)


def test_read_only_file_system(small_fs: Callable[[str], SmallFs]) -> None:
    fs = small_fs("8m")
    db = fs.path / "state.db"
    acks = populate(db)
    fs.remount(read_only=True)
    check_read_only(db, acks)
    fs.remount(read_only=False)
    verify_store(db, acks)


# --- full disk -------------------------------------------------------------------------------


def write_until_full(store: SessionDB, acks: Acks, prefix: str, attempts: int = 400) -> StorageFull:
    for n in range(attempts):
        try:
            append_acked(store, acks, f"{prefix}{n}", size=4000)
        except StorageFull as exc:
            return exc
    pytest.fail(f"{attempts} appends of 4 kB never found the disk full")


def test_full_disk_while_writing(small_fs: Callable[[str], SmallFs]) -> None:
    fs = small_fs("2m")
    db = fs.path / "state.db"
    acks = populate(db)
    store = SessionDB(db)
    try:
        append_acked(store, acks, "before-full")
        fs.fill()
        error = write_until_full(store, acks, "while-full")
        assert_tells_what_to_do(error, "free space")
        # Reads keep working on a full disk, and a retry fails the same way, writing nothing.
        assert len(store.get_messages(SESSION)) == len(acks.messages)
        with pytest.raises(StorageFull):
            store.append_message(SESSION, "user", "x" * 100_000)
        assert store.message_count(SESSION) == len(acks.messages)
        fs.free()
        append_acked(store, acks, "after-free")  # the same store recovers
    finally:
        store.close()
    verify_store(db, acks)


def test_full_disk_when_opening_an_existing_store(small_fs: Callable[[str], SmallFs]) -> None:
    fs = small_fs("2m")
    db = fs.path / "state.db"
    acks = populate(db)
    fs.fill()
    try:
        store = SessionDB(db)
    except StorageFull as exc:
        assert_tells_what_to_do(exc, "free space")
    else:
        try:
            assert len(store.get_messages(SESSION)) == len(acks.messages)
            with pytest.raises(StorageFull):
                write_until_full(store, acks, "full")
                raise AssertionError("unreachable")
        finally:
            store.close()
    fs.free()
    verify_store(db, acks)


def test_full_disk_when_creating_a_store(small_fs: Callable[[str], SmallFs]) -> None:
    fs = small_fs("2m")
    db = fs.path / "state.db"
    fs.fill()
    with pytest.raises(StorageFull) as info:
        SessionDB(db)
    assert_tells_what_to_do(info.value, "free space")
    fs.free()
    with SessionDB(db) as store:
        store.create_session(SESSION, "cli")
        store.append_message(SESSION, "user", "hello")
    with closing(sqlite3.connect(db)) as conn:
        # A passing shortage must not leave the file in the rollback-journal mode.
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    verify_store(db, tagged_only=False)


def test_page_limit_reports_storage_full(tmp_path: Path) -> None:
    """The same fault without mounting: SQLite's page limit gives SQLITE_FULL."""
    db = tmp_path / "state.db"
    acks = populate(db)
    with closing(sqlite3.connect(db)) as conn:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    engine = create_engine(db)

    @event.listens_for(engine, "connect")
    def _limit(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute(f"PRAGMA max_page_count = {pages + 8}")

    store = SessionDB(engine=engine)
    try:
        error = write_until_full(store, acks, "limited")
        assert_tells_what_to_do(error, "free space")
        assert len(store.get_messages(SESSION)) == len(acks.messages)
    finally:
        store.close()
    verify_store(db, acks)
    with SessionDB(db) as unlimited:
        append_acked(unlimited, acks, "unlimited")
    verify_store(db, acks)


# --- damaged files ---------------------------------------------------------------------------


def _random_bytes(db: Path) -> None:
    db.write_bytes(random.Random(3).randbytes(65536))


def _text_file(db: Path) -> None:
    db.write_text("these are my notes, not a database\n" * 200)


def _truncated(db: Path) -> None:
    populate(db, count=300, size=2000)
    with db.open("r+b") as handle:
        handle.truncate(db.stat().st_size // 2)


def _zeroed_header(db: Path) -> None:
    populate(db, count=50)
    with db.open("r+b") as handle:
        handle.write(b"\0" * 100)


def _garbage_pages(db: Path) -> None:
    populate(db, count=300, size=2000)
    size = db.stat().st_size
    with db.open("r+b") as handle:
        handle.seek(size // 3)
        handle.write(random.Random(4).randbytes(size // 3))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "random-bytes": _random_bytes,
    "text-file": _text_file,
    "truncated": _truncated,
    "zeroed-header": _zeroed_header,
    "garbage-pages": _garbage_pages,
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_file_raises_corrupt_database(tmp_path: Path, damage: str) -> None:
    db = tmp_path / "state.db"
    DAMAGE[damage](db)
    before = digest(db)
    raised: list[CorruptDatabase] = []
    try:
        store = SessionDB(db)
    except CorruptDatabase as exc:
        raised.append(exc)
        assert digest(db) == before, "a failed open changed the damaged file"
    else:
        reads: list[Callable[[], object]] = [
            lambda: store.get_messages(SESSION),
            lambda: store.search_messages("payload"),
            lambda: store.export_all(),
        ]
        try:
            for read in reads:
                try:
                    read()
                except CorruptDatabase as exc:
                    raised.append(exc)
        finally:
            store.close()
    assert raised, "every read of a damaged file succeeded"
    for error in raised:
        assert_tells_what_to_do(error, "backup")


# --- missing FTS5 / trigram ------------------------------------------------------------------


@contextmanager
def declared_as(db: Path, edit: str) -> Iterator[None]:
    """Rewrite the FTS declarations in ``sqlite_master`` with ``edit``, restore them after."""
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        original = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE name IN ('messages_fts', 'messages_fts_trigram')"
        ).fetchall()
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute(edit)
        conn.execute("PRAGMA writable_schema = OFF")
    try:
        yield
    finally:
        with closing(sqlite3.connect(db, isolation_level=None)) as conn:
            conn.execute("PRAGMA writable_schema = ON")
            conn.executemany("UPDATE sqlite_master SET sql = ? WHERE name = ?", [(s, n) for n, s in original])
            conn.execute("PRAGMA writable_schema = OFF")


MISSING = {
    "no-trigram-tokenizer": (
        "UPDATE sqlite_master SET sql = replace(sql, 'tokenize=''trigram''', 'tokenize=''nosuch''') "
        "WHERE name = 'messages_fts_trigram'",
        "记忆断裂",
    ),
    "no-fts5": (
        "UPDATE sqlite_master SET sql = replace(sql, 'USING fts5', 'USING fts5_unavailable') "
        "WHERE name IN ('messages_fts', 'messages_fts_trigram')",
        "payload",
    ),
}


@pytest.mark.parametrize("missing", list(MISSING))
def test_missing_search_support_raises_search_unavailable(tmp_path: Path, missing: str) -> None:
    db = tmp_path / "state.db"
    acks = populate(db)
    edit, query = MISSING[missing]
    with declared_as(db, edit):
        try:
            store = SessionDB(db)
        except SearchUnavailable as exc:
            assert_tells_what_to_do(exc, "fts5", "trigram", "sqlite")
        else:
            try:
                # Reading stored messages does not need the indexes.
                assert len(store.get_messages(SESSION)) == len(acks.messages)
                with pytest.raises(SearchUnavailable) as info:
                    store.search_messages(query)
                assert_tells_what_to_do(info.value, "fts5", "trigram", "sqlite")
                with pytest.raises(SearchUnavailable):
                    store.append_message(SESSION, "user", "cannot be indexed")
                assert store.message_count(SESSION) == len(acks.messages)
            finally:
                store.close()
    verify_store(db, acks)


# --- a lock held too long --------------------------------------------------------------------


@contextmanager
def lock_held(
    db: Path, *, seconds: float | None = None, wal: bool = False
) -> Iterator[subprocess.Popen[str]]:
    config: dict[str, Any] = {"db": str(db), "wal": wal}
    if seconds is not None:
        config["seconds"] = seconds
    holder = spawn("lock_holder", config, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        if holder.poll() is None and holder.stdin is not None:
            holder.stdin.write("\n")
            holder.stdin.flush()
        holder.wait(timeout=60)


def test_lock_held_beyond_the_retry_budget_raises_write_conflict(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    acks = populate(db)
    with SessionDB(db) as store:
        store._uow.max_attempts = 3
        with lock_held(db):
            began = time.monotonic()
            with pytest.raises(WriteConflict) as info:
                store.append_message(SESSION, "user", "blocked")
            elapsed = time.monotonic() - began
            assert info.value.attempts == 3
            assert_tells_what_to_do(info.value, "retry later")
            assert 2.0 < elapsed < 15.0
            # Readers are not blocked by a writer in WAL mode.
            assert len(store.get_messages(SESSION)) == len(acks.messages)
            assert store.search_messages("payload")
        assert store.message_count(SESSION) == len(acks.messages)
        append_acked(store, acks, "after-release")
    verify_store(db, acks)


def test_lock_held_within_the_retry_budget_is_waited_out(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    acks = populate(db)
    with SessionDB(db) as store, lock_held(db, seconds=2.5):
        append_acked(store, acks, "waited")
        assert store._uow.retry_count >= 1
    verify_store(db, acks)


def test_first_open_waits_out_a_lock_within_the_retry_budget(tmp_path: Path) -> None:
    """Another process is creating the schema (holding the write lock) when we open.

    Creating or upgrading the schema is a write like any other: it must be retried
    while the lock is busy, not fail after the 1 s busy timeout.
    """
    db = tmp_path / "state.db"
    with lock_held(db, seconds=2.5, wal=True), SessionDB(db) as store:
        store.create_session(SESSION, "cli")
        store.append_message(SESSION, "user", "hello")
    verify_store(db, tagged_only=False)


def test_store_errors_are_distinct() -> None:
    kinds = [ReadOnlyStore, StorageFull, CorruptDatabase, SearchUnavailable, WriteConflict, UnsafePath]
    assert len(set(kinds)) == len(kinds)
    assert all(issubclass(kind, StoreError) for kind in kinds)
    assert not any(issubclass(a, b) for a in kinds for b in kinds if a is not b)
