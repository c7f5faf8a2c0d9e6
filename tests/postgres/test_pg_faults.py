"""Server faults on PostgreSQL: killed backends, dropped connections, timeouts, many writers.

Each test runs against the real server (its own fresh database, already at head: a copy
of a store created once per run, see :func:`pg_url` below) and checks what a caller sees
and what the database holds afterwards: a write is applied whole or not at
all, a failure is one ``StoreError`` saying what happened, and the store recovers by
itself. The server restart lives in ``test_pg_restart.py`` (a private cluster).
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from hermes_store import ServerUnavailable, SessionDB, StoreError, StoreTimeout
from hermes_store.db import sqlalchemy_private


def _admin(pg_url: str) -> sa.Engine:
    return sa.create_engine(pg_url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)


def _counts(db: SessionDB, session_id: str) -> tuple[int, int, int]:
    """(messages present, message_count, tool_call_count) of one session."""
    row = db.get_session(session_id)
    assert row is not None
    return db.message_count(session_id), row["message_count"], row["tool_call_count"]


@pytest.fixture
def pg_url(pg_head_url: str) -> str:
    """Here each test's new database starts at head (``pg_head_url``): these tests are about
    faults while a store works, not about creating its schema."""
    return pg_head_url


@pytest.fixture
def store(pg_url: str) -> Iterator[SessionDB]:
    db = SessionDB(url=pg_url)
    db.create_session("s", "cli")
    yield db
    db.close()


class KillOnStatement:
    """Terminates the store's own backend just before its next ``UPDATE sessions``.

    By then the message ``INSERT`` of ``append_message`` has run in the same transaction,
    so the kill lands mid-transaction. Fires ``times`` times.
    """

    def __init__(self, db: SessionDB, admin: sa.Engine, times: int = 1) -> None:
        self.db, self.admin, self.left = db, admin, times
        sa.event.listen(db.engine, "before_cursor_execute", self)

    def __call__(self, _conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if self.left and statement.lstrip().startswith("UPDATE sessions"):
            self.left -= 1
            pid = cursor.connection.info.backend_pid
            with self.admin.connect() as connection:
                # The timeout form waits until the backend has really exited.
                assert connection.exec_driver_sql(f"SELECT pg_terminate_backend({pid}, 5000)").scalar()

    def remove(self) -> None:
        sa.event.remove(self.db.engine, "before_cursor_execute", self)


def test_backend_killed_mid_transaction_is_retried_once_and_applied_once(
    store: SessionDB, pg_url: str
) -> None:
    admin = _admin(pg_url)
    store.append_message("s", "user", "before")
    killer = KillOnStatement(store, admin)
    retries = store._uow.retry_count
    message_id = store.append_message("s", "assistant", "survives", tool_calls=[{"id": "a"}])
    killer.remove()
    assert killer.left == 0 and store._uow.retry_count == retries + 1
    assert _counts(store, "s") == (2, 2, 1)
    assert [m["content"] for m in store.get_messages("s")] == ["before", "survives"]
    assert store.get_messages("s")[-1]["id"] == message_id
    admin.dispose()


def test_backend_killed_with_no_reconnect_budget_fails_clearly_and_writes_nothing(
    store: SessionDB, pg_url: str
) -> None:
    admin = _admin(pg_url)
    store._uow.reconnect_wait_s = 0.0
    killer = KillOnStatement(store, admin)
    with pytest.raises(ServerUnavailable, match="unreachable or dropped the connection while"):
        store.append_message("s", "user", "half a transaction", tool_calls=[{"id": "a"}])
    killer.remove()
    assert _counts(store, "s") == (0, 0, 0)  # the INSERT went with the killed transaction
    store.append_message("s", "user", "next write works")
    assert _counts(store, "s") == (1, 1, 0)
    admin.dispose()


def test_connection_lost_during_commit_is_reported_as_unknown_and_never_applied_twice(
    store: SessionDB, pg_url: str
) -> None:
    """Every COMMIT's connection is killed: the append finds its row missing, writes it once
    more (lost again), and then reports the outcome as unknown; it is stored at most once."""
    admin = _admin(pg_url)

    def kill_before_commit(connection: sa.Connection) -> None:
        pid = connection.connection.driver_connection.info.backend_pid  # type: ignore[union-attr]
        with admin.connect() as other:
            other.exec_driver_sql(f"SELECT pg_terminate_backend({pid}, 5000)")

    sa.event.listen(store.engine, "commit", kill_before_commit)
    retries = store._uow.retry_count
    try:
        with pytest.raises(ServerUnavailable, match="during COMMIT") as caught:
            store.append_message("s", "user", "commit lost")
    finally:
        sa.event.remove(store.engine, "commit", kill_before_commit)
    assert caught.value.outcome_unknown and store._uow.retry_count == retries
    present, message_count, _ = _counts(store, "s")
    assert present == message_count <= 1  # applied whole or not at all, and never twice
    admin.dispose()


def _kill_write_backend(store: SessionDB, admin: sa.Engine) -> None:
    write_connection = store._uow._write_connection
    assert write_connection is not None
    assert sqlalchemy_private.route(write_connection) is sqlalchemy_private.Route.BARE_CURSOR
    pid = write_connection.connection.driver_connection.info.backend_pid  # type: ignore[union-attr]
    with admin.connect() as connection:
        assert connection.exec_driver_sql(f"SELECT pg_terminate_backend({pid}, 5000)").scalar()


def test_a_backend_killed_between_writes_is_replaced_with_no_listener_set(
    store: SessionDB, pg_url: str
) -> None:
    admin = _admin(pg_url)
    store.append_message("s", "user", "before")
    _kill_write_backend(store, admin)
    store.append_message("s", "user", "after")  # fails on the dead connection, retried on a new one
    assert _counts(store, "s") == (2, 2, 0)
    store._uow.reconnect_wait_s = 0.0
    _kill_write_backend(store, admin)
    with pytest.raises(ServerUnavailable):  # the store's error, not the driver's
        store.append_message("s", "user", "lost")
    assert _counts(store, "s") == (2, 2, 0)
    admin.dispose()


def test_connections_dropped_from_the_pool_are_replaced_without_errors(store: SessionDB, pg_url: str) -> None:
    store.append_message("s", "user", "first")
    assert store.search_messages("first")  # a pooled read connection now exists too
    admin = _admin(pg_url)
    database = sa.make_url(pg_url).database
    with admin.connect() as connection:
        killed = connection.exec_driver_sql(
            "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
            f"WHERE datname = '{database}' AND pid <> pg_backend_pid()"
        ).scalar()
    assert killed >= 2  # the write connection and at least one idle pooled reader
    # reads: pre-ping replaced the dead pooled connection
    assert [h["session_id"] for h in store.search_messages("first")] == ["s"]
    store.append_message("s", "user", "second")  # write: retried on a fresh connection
    assert _counts(store, "s") == (2, 2, 0)
    admin.dispose()


def _hold(pg_url: str, statement: str, started: threading.Event, release: threading.Event) -> None:
    engine = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    with engine.connect() as connection, connection.begin():
        connection.exec_driver_sql(statement)
        started.set()
        release.wait(30)
    engine.dispose()


class Holder:
    """Another connection holding a lock in an open transaction until released."""

    def __init__(self, pg_url: str, statement: str) -> None:
        self.started, self.release = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=_hold, args=(pg_url, statement, self.started, self.release))
        self.thread.start()
        assert self.started.wait(10)

    def stop(self) -> None:
        self.release.set()
        self.thread.join(30)


def test_lock_held_past_lock_timeout_is_a_typed_error_naming_it(pg_url: str) -> None:
    SessionDB(url=pg_url).create_session("s", "cli")
    db = SessionDB(url=pg_url, lock_timeout="150ms")
    holder = Holder(pg_url, "SELECT 1 FROM sessions WHERE id = 's' FOR UPDATE")
    try:
        with pytest.raises(StoreTimeout) as caught:
            db.append_message("s", "user", "waits for the row lock")
    finally:
        holder.stop()
    assert caught.value.setting == "lock_timeout"
    assert "lock_timeout exceeded while" in str(caught.value)
    assert _counts(db, "s") == (0, 0, 0)  # rolled back whole, INSERT included
    db.append_message("s", "user", "after the lock is released")
    assert _counts(db, "s") == (1, 1, 0)
    db.close()


def test_statement_past_statement_timeout_is_a_typed_error_naming_it(pg_url: str) -> None:
    SessionDB(url=pg_url).create_session("s", "cli")
    db = SessionDB(url=f"{pg_url}?statement_timeout=150ms&lock_timeout=0")
    holder = Holder(pg_url, "LOCK TABLE messages IN ACCESS EXCLUSIVE MODE")
    try:
        with pytest.raises(StoreTimeout) as read_error:
            db.search_messages("anything")
        with pytest.raises(StoreTimeout) as write_error:
            db.append_message("s", "user", "never half-applied")
    finally:
        holder.stop()
    assert read_error.value.setting == write_error.value.setting == "statement_timeout"
    assert isinstance(read_error.value, StoreError)
    assert _counts(db, "s") == (0, 0, 0)
    db.append_message("s", "user", "fine once the table is free")
    assert _counts(db, "s") == (1, 1, 0)
    db.close()


def test_timeouts_and_pool_settings_reach_the_server(pg_url: str) -> None:
    db = SessionDB(url=f"{pg_url}?statement_timeout=7s&pool_size=3", lock_timeout=1234, max_overflow=2)
    with db.engine.connect() as connection:
        assert connection.exec_driver_sql("SHOW statement_timeout").scalar() == "7s"
        assert connection.exec_driver_sql("SHOW lock_timeout").scalar() == "1234ms"
    assert (db.engine.pool.size(), db.engine.pool._max_overflow) == (3, 2)  # type: ignore[attr-defined]
    db.close()
    defaults = SessionDB(url=pg_url)
    with defaults.engine.connect() as connection:
        assert connection.exec_driver_sql("SHOW statement_timeout").scalar() == "1min"
        assert connection.exec_driver_sql("SHOW lock_timeout").scalar() == "10s"
        assert connection.exec_driver_sql("SHOW jit").scalar() == "off"
    defaults.close()
    # A caller's own options come after the store's, so theirs win.
    jit_on = SessionDB(url=pg_url, connect_args={"options": "-c jit=on"})
    with jit_on.engine.connect() as connection:
        assert connection.exec_driver_sql("SHOW jit").scalar() == "on"
    jit_on.close()


WRITERS = 16
PER_WRITER = 12
SHARED_SESSIONS = ("a", "b", "c", "d")


def _writer(url: str, index: int) -> None:
    db = SessionDB(url=url)
    for i in range(PER_WRITER):
        session = SHARED_SESSIONS[(index + i) % len(SHARED_SESSIONS)]
        db.append_message(session, "assistant", f"w{index}-{i}", tool_calls=[{"id": "x"}, {"id": "y"}])
    db.close()


def test_sixteen_processes_writing_to_the_same_sessions_lose_nothing(pg_url: str) -> None:
    db = SessionDB(url=pg_url)
    for session in SHARED_SESSIONS:
        db.create_session(session, "cli")
    context = multiprocessing.get_context("fork")  # fast start; each child opens its own store
    workers = [context.Process(target=_writer, args=(pg_url, n)) for n in range(WRITERS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [worker.exitcode for worker in workers] == [0] * WRITERS
    per_session = WRITERS * PER_WRITER // len(SHARED_SESSIONS)
    for session in SHARED_SESSIONS:
        assert _counts(db, session) == (per_session, per_session, 2 * per_session)
    contents = {m["content"] for s in SHARED_SESSIONS for m in db.get_messages(s)}
    assert contents == {f"w{n}-{i}" for n in range(WRITERS) for i in range(PER_WRITER)}
    db.close()


def test_an_append_whose_commit_answer_is_lost_returns_its_id_once_it_is_found(pg_url: str) -> None:
    """The server commits, the answer never reaches the client: the append finds its row on
    a fresh connection and returns its id, neither raising nor writing it twice."""
    from commit_cutting_proxy import CommitCuttingProxy

    SessionDB(url=pg_url).close()
    server = sa.make_url(pg_url)
    with CommitCuttingProxy(server.host or "127.0.0.1", server.port or 5432) as proxy:
        through_proxy = server.set(host="127.0.0.1", port=proxy.port)
        db = SessionDB(url=through_proxy.render_as_string(hide_password=False))
        try:
            db.create_session("lost", "cli")
            proxy.arm()
            message_id = db.append_message("lost", "user", "committed, answer lost")
            assert proxy.cut.is_set()
            rows = db.get_messages("lost")
            counted = (db.get_session("lost") or {})["message_count"]
        finally:
            db.close()
    assert [(row["id"], row["content"]) for row in rows] == [(message_id, "committed, answer lost")]
    assert counted == 1
