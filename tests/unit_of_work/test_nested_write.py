"""A write started inside another write fails at once, never deadlocks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from hermes_store import NestedWrite, SessionDB

HANG_GUARD_S = 60  # only so that a deadlock fails the test instead of hanging the suite


def outcome_in_thread(call: Callable[[], object]) -> BaseException | None:
    """Run ``call`` on a thread; its exception (or None); fail if it never returns."""
    caught: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # the test inspects whatever was raised
            caught.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_GUARD_S)
    if thread.is_alive():
        pytest.fail("the nested write deadlocked on the writer lock")
    return caught[0] if caught else None


def test_a_write_nested_in_execute_write_is_refused_with_a_reason(db_path: Path) -> None:
    db = SessionDB(db_path)
    error = outcome_in_thread(lambda: db._execute_write(lambda _conn: db.set_meta("k", "v")))
    assert isinstance(error, NestedWrite)
    assert "setting metadata" in str(error) and "inside another write" in str(error)
    # The outer write rolled back whole and the store is usable afterwards.
    assert db.get_meta("k") is None
    db.set_meta("k", "v")
    assert db.get_meta("k") == "v"
    db.close()


def test_a_write_nested_in_the_public_unit_of_work_is_refused(db_path: Path) -> None:
    db = SessionDB(db_path)
    db.create_session("s", "cli")

    def outer(_session: object) -> None:
        db.append_message("s", "user", "inner")

    error = outcome_in_thread(lambda: db.unit_of_work.write(outer, "composing a write"))
    assert isinstance(error, NestedWrite)
    assert db.message_count("s") == 0
    db.close()


def test_reads_inside_a_write_and_writes_from_other_threads_still_work(db_path: Path) -> None:
    db = SessionDB(db_path)
    db.create_session("s", "cli")

    others: list[threading.Thread] = []

    def outer(_session: object) -> str | None:
        # Another thread's write just waits for the lock: only the same thread is refused.
        others.append(threading.Thread(target=lambda: db.set_meta("from-thread", "yes")))
        others[-1].start()
        return db.get_meta("absent")

    assert db.unit_of_work.write(outer, "reading inside a write") is None
    for thread in others:
        thread.join(HANG_GUARD_S)
    assert db.get_meta("from-thread") == "yes"
    db.set_meta("after", "ok")
    assert db.get_meta("after") == "ok"
    db.close()
