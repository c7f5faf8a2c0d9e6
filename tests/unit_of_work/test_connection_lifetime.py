"""The connections a store holds outside the pool end with it.

* After ``os.fork()`` the child never uses a connection its parent opened (a SQLite
  connection must not cross a fork; a server connection's socket would be shared): it
  opens its own, and the parent's keep working in the parent.
* When opening a store fails (here: while reading its schema), the engine it made is
  disposed at once, not left holding the file open until garbage collection.
* A write connection lost in the middle of a write (invalidated) is forgotten whole:
  the record of its open driver transaction goes with it.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from hermes_store import SessionDB
from hermes_store.db import driver_transaction
from hermes_store.repository import meta

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork() is POSIX only")


@needs_fork
def test_a_forked_child_opens_connections_of_its_own(db_path: Path, tmp_path: Path) -> None:
    db = SessionDB(db_path)
    used: set[int] = set()

    @sa.event.listens_for(db.engine, "before_cursor_execute")
    def record(connection: sa.Connection, *_args: Any) -> None:
        used.add(id(connection.connection.dbapi_connection))

    # The write connection and idle read connections are now held; the pool has others.
    db.create_session("s", "cli")
    db.append_message("s", "user", "from the parent")
    assert [m["content"] for m in db.get_messages("s")] == ["from the parent"]
    pool_connection = db.engine.raw_connection()
    used.add(id(pool_connection.dbapi_connection))
    pool_connection.close()  # back into the pool
    raw = db._conn  # the upstream-style raw connection, kept by the store
    assert raw is not None
    parents = set(used) | {id(raw)}
    report = tmp_path / "child.json"
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without running the parent's clean-up
        code = 1
        try:
            used.clear()
            db.append_message("s", "user", "from the child")
            contents = [m["content"] for m in db.get_messages("s")]
            used.add(id(db._conn))
            report.write_text(json.dumps({"shared": len(used & parents), "own": len(used), "seen": contents}))
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    child = json.loads(report.read_text())
    assert child["shared"] == 0, "the child ran statements on connections of its parent"
    assert child["own"] >= 1
    assert child["seen"] == ["from the parent", "from the child"]
    # The parent's connections were neither closed nor disturbed by the child.
    db.append_message("s", "user", "parent again")
    assert db.message_count("s") == 3
    db.close()


def _open_descriptors(path: Path) -> int:
    count = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            if os.readlink(fd) == str(path):
                count += 1
        except OSError:
            continue
    return count


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open files through /proc")
def test_an_engine_whose_schema_cannot_be_read_is_disposed(db_path: Path) -> None:
    # A schema_version that is not a number: reading the schema fails after connecting.
    connection = sqlite3.connect(db_path)
    connection.execute("CREATE TABLE schema_version (version TEXT)")
    connection.execute("INSERT INTO schema_version VALUES ('not a number')")
    connection.commit()
    connection.close()
    with pytest.raises(ValueError) as failure:
        SessionDB(db_path)
    # The traceback (kept by pytest.raises) still references the half-built store: only
    # an explicit dispose closes the engine's pooled connections now.
    assert failure.traceback
    assert _open_descriptors(db_path) == 0


def test_write_connections_lost_mid_write_leave_no_open_transaction_behind(db_path: Path) -> None:
    db = SessionDB(db_path)
    db.create_session("s", "cli")
    lost: list[sa.Connection] = []

    def lose_the_connection(connection: sa.Connection) -> None:
        lost.append(connection)
        connection.connection.dbapi_connection.close()  # as a broken connection would be
        meta.put(connection, "k", "v")

    for _ in range(20):
        with pytest.raises(sa.exc.ProgrammingError, match="closed database"):
            db.unit_of_work.write_connection(lose_the_connection, "a write whose connection is lost")
    assert all(connection.closed for connection in lost)  # invalidated, then discarded
    assert [c for c in lost if c in driver_transaction.OPEN_TRANSACTIONS] == []
    db.append_message("s", "user", "after the losses")
    assert db.message_count("s") == 1
    db.close()
