"""Group commit: writes queued while the writer lock is held share one transaction.

Every test makes the grouping certain instead of hoping for it: the test thread holds the
store's writer lock while the writer threads start, waits until all of them are queued,
then lets go — the first thread to get the lock runs them all in one transaction. Each
write must still get its own result or its own error, and nothing may be lost or doubled.
"""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Connection

from hermes_store import NestedWrite, SessionDB, WriteConflict, create_engine
from hermes_store.repository import meta
from hermes_store.schema.migrate import ensure_schema
from hermes_store.uow.unit_of_work import UnitOfWork


class Outcomes:
    """What each writer thread got back: a result or an exception, by index."""

    def __init__(self) -> None:
        self.values: dict[int, Any] = {}

    def record(self, index: int, call: Callable[[], Any]) -> None:
        try:
            self.values[index] = call()
        except BaseException as exc:
            self.values[index] = exc


def queued_together(uow: UnitOfWork, calls: list[Callable[[], Any]]) -> Outcomes:
    """Run ``calls`` in threads that all queue while the writer lock is held, then release it."""
    outcomes = Outcomes()
    threads = [threading.Thread(target=outcomes.record, args=(n, call)) for n, call in enumerate(calls)]
    with uow._lock:
        for thread in threads:
            thread.start()
            # One at a time, so the queue order (the order writes run in) is the index order.
            while len(uow._queue) < threads.index(thread) + 1:
                time.sleep(0.001)
    for thread in threads:
        thread.join(30)
    return outcomes


def unit_of_work(path: Path, **policy: Any) -> UnitOfWork:
    """A unit of work on a store file with the schema made, on ``journal_mode`` if given."""
    journal = {"journal_mode": policy.pop("journal_mode")} if "journal_mode" in policy else {}
    engine = create_engine(path, prepare=True, **journal)
    ensure_schema(engine)
    return UnitOfWork(engine, **policy)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionDB]:
    db = SessionDB(tmp_path / "state.db")
    db.create_session("s", "cli")
    yield db
    db.close()


def count_begins(db: SessionDB) -> list[str]:
    begins: list[str] = []
    event.listen(
        db.engine,
        "before_cursor_execute",
        lambda *args: begins.append(args[2]) if args[2].startswith("BEGIN") else None,
    )
    return begins


def test_writes_queued_during_a_commit_share_one_transaction_in_arrival_order(store: SessionDB) -> None:
    begins = count_begins(store)
    calls = [lambda n=n: store.append_message("s", "user", f"message {n}") for n in range(8)]
    outcomes = queued_together(store.unit_of_work, calls)
    ids = [outcomes.values[n] for n in range(8)]
    assert begins == ["BEGIN IMMEDIATE"]
    assert ids == sorted(ids) and len(set(ids)) == 8
    assert [m["content"] for m in store.get_messages("s")] == [f"message {n}" for n in range(8)]
    assert [m["id"] for m in store.get_messages("s")] == ids
    assert store.get_session("s")["message_count"] == 8  # type: ignore[index]


def test_a_write_that_fails_its_own_checks_fails_alone(store: SessionDB) -> None:
    calls = [
        lambda: store.append_message("s", "user", "first"),
        lambda: store.append_message("no-such-session", "user", "refused"),
        lambda: store.set_session_title("s", "a title"),
        lambda: store.append_message("s", "user", "last"),
    ]
    outcomes = queued_together(store.unit_of_work, calls)
    assert isinstance(outcomes.values[1], sqlite3.IntegrityError)
    assert outcomes.values[2] is True
    assert [m["content"] for m in store.get_messages("s")] == ["first", "last"]
    session = store.get_session("s")
    assert session is not None and session["message_count"] == 2 and session["title"] == "a title"
    assert store.message_count() == 2


def test_a_nested_write_inside_a_joined_write_fails_alone(tmp_path: Path) -> None:
    uow = unit_of_work(tmp_path / "state.db")

    def nested(connection: Connection) -> None:
        meta.put(connection, "nested", "undone")
        uow.write_connection(lambda inner: None, "an inner write")

    calls = [
        lambda: uow.write_connection(lambda c: meta.put(c, "a", "1"), "writing a"),
        lambda: uow.write_connection(nested, "an outer write"),
        lambda: uow.write_connection(lambda c: meta.put(c, "b", "2"), "writing b"),
    ]
    outcomes = queued_together(uow, calls)
    assert isinstance(outcomes.values[1], NestedWrite)
    with uow.read() as session:
        assert [meta.get(session, key) for key in ("a", "nested", "b")] == ["1", None, "2"]
    assert uow.write_count == 2
    uow.close()


def test_a_busy_commit_retries_every_member_of_the_group_once_each(tmp_path: Path) -> None:
    """A COMMIT refused by a reader (rollback journal) rolls the whole group back: every
    member runs again in the next attempt and is stored exactly once."""
    path = tmp_path / "state.db"
    uow = unit_of_work(path, journal_mode="delete", retry_min_s=0.01, retry_max_s=0.02)
    runs: list[str] = []
    # Used from whichever writer thread leads the group.
    reader = sqlite3.connect(path, isolation_level=None, timeout=0, check_same_thread=False)
    with closing(reader):

        def first(connection: Connection) -> None:
            runs.append("first")
            if len(runs) == 1:
                # The group holds RESERVED; the reader takes SHARED and keeps it past the
                # busy timeout, so this attempt's COMMIT is refused.
                reader.execute("BEGIN")
                reader.execute("SELECT COUNT(*) FROM state_meta").fetchone()
            else:
                reader.execute("COMMIT")
            meta.put(connection, "first", "1")

        def other(key: str) -> Callable[[Connection], None]:
            def work(connection: Connection) -> None:
                runs.append(key)
                meta.put(connection, key, "1")

            return work

        calls = [
            lambda: uow.write_connection(first, "writing first"),
            lambda: uow.write_connection(other("second"), "writing second"),
            lambda: uow.write_connection(other("third"), "writing third"),
        ]
        outcomes = queued_together(uow, calls)
    assert [outcomes.values[n] for n in range(3)] == [None, None, None]
    assert runs == ["first", "second", "third"] * 2
    assert uow.retry_count == 1 and uow.write_count == 3
    with closing(sqlite3.connect(path)) as check:
        assert sorted(check.execute("SELECT key FROM state_meta WHERE value = '1'").fetchall()) == [
            ("first",),
            ("second",),
            ("third",),
        ]
    uow.close()


def test_a_lock_held_past_the_budget_gives_every_member_write_conflict(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    uow = unit_of_work(path, max_attempts=2, retry_min_s=0.01, retry_max_s=0.02)
    with closing(sqlite3.connect(path, isolation_level=None)) as holder:
        holder.execute("BEGIN IMMEDIATE")
        calls = [
            (lambda key=key: uow.write_connection(lambda c: meta.put(c, key, "v"), f"writing {key}"))
            for key in ("a", "b", "c")
        ]
        outcomes = queued_together(uow, calls)
        holder.execute("ROLLBACK")
    for index, key in enumerate(("a", "b", "c")):
        error = outcomes.values[index]
        assert isinstance(error, WriteConflict) and f"writing {key}" in str(error)
    assert uow.write_count == 0 and uow.retry_count == 1
    uow.close()


def test_writes_of_an_orm_session_run_alone_and_the_queue_still_drains(store: SessionDB) -> None:
    """An ORM write waiting for the lock beside two queued appends: the appends share one
    transaction and the ORM write has one of its own, whichever thread gets the lock first."""
    uow = store.unit_of_work
    transactions: list[list[str]] = []
    current: list[list[str]] = []  # the open write transaction's statements, if any

    def record(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        words = statement.split()
        if words[0] == "BEGIN":
            current.append([])
        elif words[0] == "COMMIT" and current:
            transactions.append(current.pop())
        elif current:  # "INSERT INTO <table>", "UPDATE <table> SET"
            current[-1].append(f"{words[0]} {words[2] if words[0] == 'INSERT' else words[1]}")

    event.listen(store.engine, "before_cursor_execute", record)
    outcomes = Outcomes()
    appends = [
        threading.Thread(
            target=outcomes.record, args=(n, lambda n=n: store.append_message("s", "user", f"m{n}"))
        )
        for n in range(2)
    ]
    orm_write = threading.Thread(
        target=outcomes.record,
        args=(2, lambda: uow.write(lambda session: meta.put(session, "orm", "alone"), "an ORM write")),
    )
    with uow._lock:
        appends[0].start()
        while len(uow._queue) < 1:
            time.sleep(0.001)
        orm_write.start()  # never queues: it waits for the lock itself
        time.sleep(0.2)
        appends[1].start()
        while len(uow._queue) < 2:
            time.sleep(0.001)
    for thread in [*appends, orm_write]:
        thread.join(30)
    assert isinstance(outcomes.values[0], int) and isinstance(outcomes.values[1], int)
    assert outcomes.values[2] is None and store.get_meta("orm") == "alone"
    assert sorted(transactions, key=len) == [
        ["INSERT state_meta"],
        ["INSERT messages", "UPDATE sessions", "INSERT messages", "UPDATE sessions"],
    ]


def test_a_writer_interrupted_while_queued_is_withdrawn_and_the_others_go_on(tmp_path: Path) -> None:
    """Ctrl-C in a thread waiting for its group: its write never runs, nobody waits on it."""
    uow = unit_of_work(tmp_path / "state.db")
    outcomes = Outcomes()

    def put(key: str) -> Callable[[], None]:
        return lambda: uow.write_connection(lambda c: meta.put(c, key, "1"), f"writing {key}")

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with uow._lock:
            leader = threading.Thread(target=outcomes.record, args=(0, put("leader")))
            leader.start()
            while len(uow._queue) < 1:
                time.sleep(0.001)
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            with pytest.raises(KeyboardInterrupt):
                put("interrupted")()  # queued behind the leader, waiting when the signal comes
            later = threading.Thread(target=outcomes.record, args=(1, put("later")))
            later.start()
            while len(uow._queue) < 2:
                time.sleep(0.001)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    leader.join(30)
    later.join(30)
    assert not later.is_alive() and outcomes.values == {0: None, 1: None}
    with uow.read() as session:
        assert [meta.get(session, key) for key in ("leader", "interrupted", "later")] == ["1", None, "1"]
    uow.close()


@pytest.mark.parametrize("watched", [True, False], ids=["statements-watched", "bare-driver"])
def test_several_failing_writes_cost_the_group_one_rerun(store: SessionDB, watched: bool) -> None:
    """Three writes of eight fail their own checks: the group is rolled back once, and the
    rerun keeps each remaining write apart (a savepoint each), so the five good writes run
    twice in all, not once per failure. Unwatched, statements take the bare driver's way,
    where a failed one must not end the transaction its savepoint lives in."""
    begins = count_begins(store) if watched else ["BEGIN IMMEDIATE"] * 2
    good = [0, 2, 3, 5, 7]
    calls = [
        (lambda n=n: store.append_message("s", "user", f"message {n}"))
        if n in good
        else (lambda n=n: store.append_message(f"missing {n}", "user", "refused"))
        for n in range(8)
    ]
    outcomes = queued_together(store.unit_of_work, calls)
    assert begins == ["BEGIN IMMEDIATE", "BEGIN IMMEDIATE"]
    assert all(isinstance(outcomes.values[n], sqlite3.IntegrityError) for n in range(8) if n not in good)
    assert [m["content"] for m in store.get_messages("s")] == [f"message {n}" for n in good]
    assert [m["id"] for m in store.get_messages("s")] == [outcomes.values[n] for n in good]
    assert store.get_session("s")["message_count"] == len(good)  # type: ignore[index]


def test_a_member_interrupted_while_its_group_runs_is_never_committed(tmp_path: Path) -> None:
    """Ctrl-C in a thread whose write is in the group another thread is running: the caller
    sees the interruption, so the write must not be committed behind its back."""
    uow = unit_of_work(tmp_path / "state.db")
    outcomes = Outcomes()
    in_group = threading.Event()

    def slow_leader(connection: Connection) -> None:
        in_group.set()
        time.sleep(0.6)  # the member is interrupted while the group is in flight
        meta.put(connection, "leader", "1")

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    gate = threading.Lock()
    gate.acquire()

    def hold_the_writer_lock() -> None:
        with uow._lock:
            gate.acquire()  # until the member is queued behind the leader

    holder = threading.Thread(target=hold_the_writer_lock)
    holder.start()
    while not uow._lock.locked():
        time.sleep(0.001)
    lead = lambda: uow.write_connection(slow_leader, "lead")  # noqa: E731
    leader = threading.Thread(target=outcomes.record, args=(0, lead))
    leader.start()
    while len(uow._queue) < 1:
        time.sleep(0.001)
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        threading.Timer(0.1, gate.release).start()  # the leader then runs [leader, member]
        signal.setitimer(signal.ITIMER_REAL, 0.4)
        with pytest.raises(KeyboardInterrupt):
            uow.write_connection(lambda c: meta.put(c, "member", "1"), "member")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    leader.join(30)
    holder.join(30)
    assert in_group.is_set() and outcomes.values == {0: None}
    with uow.read() as session:
        assert [meta.get(session, key) for key in ("leader", "member")] == ["1", None]
    uow.close()
