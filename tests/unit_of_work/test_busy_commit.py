"""A COMMIT refused by a reader must not leave a transaction open.

With the rollback journal (``journal_mode=DELETE``, the fallback where WAL is refused)
a writer holds RESERVED while readers may still take SHARED; COMMIT then needs
EXCLUSIVE and, if a reader holds on for longer than the busy timeout, fails with
SQLITE_BUSY. SQLite keeps that transaction open. The store must end it, so that the
next attempt can begin and other processes are not locked out.

The store is put on the rollback journal with ``create_engine(..., prepare=True, journal_mode="delete")``
on SQLite's ordinary ``unix`` VFS: its POSIX locks let SHARED and RESERVED coexist, as
on a network file system. (The ``unix-dotfile`` VFS used by ``test_journal_fallback.py``
cannot show this fault: every dot-file lock is exclusive, so a reader and a writer never
overlap and COMMIT never waits for one.)
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import orm

from hermes_store import SessionDB, WriteConflict, create_engine
from hermes_store.repository import meta
from hermes_store.uow.unit_of_work import UnitOfWork

WORKERS = Path(__file__).resolve().parent / "_busy_commit_workers.py"


def delete_mode_store(path: Path) -> SessionDB:
    db = SessionDB(engine=create_engine(path, prepare=True, journal_mode="delete"))
    db.create_session("shared", "cli")
    return db


def test_a_commit_refused_by_a_reader_leaves_no_transaction_open(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = delete_mode_store(path)
    uow = UnitOfWork(db.engine, max_attempts=1)
    with closing(sqlite3.connect(path, isolation_level=None, timeout=0)) as reader:

        def work(session: orm.Session) -> None:
            meta.put(session, "k", "refused")
            # The writer holds RESERVED now; the reader still gets SHARED and keeps it.
            reader.execute("BEGIN")
            reader.execute("SELECT COUNT(*) FROM messages").fetchone()

        with pytest.raises(WriteConflict):
            uow.write(work, "writing while a reader holds its lock")
        reader.execute("COMMIT")
        # The refused transaction is gone: another connection can write and read at once.
        reader.execute("BEGIN IMMEDIATE")
        assert reader.execute("SELECT value FROM state_meta WHERE key = 'k'").fetchone() is None
        reader.execute("ROLLBACK")
    # And the unit of work that met the refusal writes again.
    uow.write(lambda session: meta.put(session, "k", "accepted"), "writing again")
    with uow.read() as session:
        assert meta.get(session, "k") == "accepted"
    uow.close()
    db.close()


# Not serial: the readers' holds are sleeps (4 x 1.6 s, each longer than the 1 s busy
# timeout), and the writers' retry budget (15 x ~1.15 s) outlasts all of them, so load
# from parallel tests can delay the writers but not make them fail.
def test_writers_and_lock_holding_readers_in_processes_lose_nothing(tmp_path: Path) -> None:
    """3 writer processes append while 2 reader processes hold SHARED longer than 1 s."""
    path = tmp_path / "state.db"
    delete_mode_store(path).close()
    go = tmp_path / "readers-done"
    per_writer = 6
    readers = [
        subprocess.Popen([sys.executable, str(WORKERS), "reader", str(path), "4", "1.6"]) for _ in range(2)
    ]
    time.sleep(0.3)  # let the readers take their first locks before the writers start
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKERS),
                "writer",
                str(path),
                f"w{n}",
                str(per_writer),
                str(tmp_path / f"acks-{n}"),
                str(go),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(3)
    ]
    try:
        for process in readers:
            assert process.wait(timeout=120) == 0
        go.touch()
        outcomes = [process.communicate(timeout=120) for process in writers]
    finally:
        for process in (*readers, *writers):
            if process.poll() is None:
                process.kill()
    for process, (out, err) in zip(writers, outcomes, strict=True):
        assert process.returncode == 0, err
        assert "after-ok" in out, err
    acked: dict[str, int] = {}
    for n in range(3):
        for line in (tmp_path / f"acks-{n}").read_text().splitlines():
            text, message_id = line.split("\t")
            acked[text] = int(message_id)
    assert len(acked) == 3 * per_writer
    with closing(sqlite3.connect(path, isolation_level=None, timeout=30)) as check:
        stored = dict(check.execute("SELECT content, id FROM messages WHERE session_id = 'shared'"))
        assert stored == acked  # 0 lost, none twice, each under the id it was acknowledged with
        counted = check.execute("SELECT message_count FROM sessions WHERE id = 'shared'").fetchone()[0]
        assert counted == len(acked)
        assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    # Nothing is left stuck: this process too can still write and read.
    db = SessionDB(engine=create_engine(path, prepare=True, journal_mode="delete"))
    db.append_message("shared", "user", "after everyone")
    assert db.message_count("shared") == len(acked) + 1
    db.close()
