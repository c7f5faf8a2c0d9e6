"""A child forked while the parent's threads write gets a store of its own that works.

``os.fork()`` copies only the forking thread, but every lock, queue and thread id the
other threads had set: a writer lock held at that instant would never be released in the
child, a write queued by another thread would lead a group nobody runs, and the recorded
writer thread would make the child's first write look nested. The child must start with a
fresh writer lock, an empty write queue and no writer, so that its first write succeeds.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from hermes_store import SessionDB

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork() is POSIX only")

CHILDREN = 10
CHILD_DEADLINE_S = 10.0


def _writers(db: SessionDB, stop: threading.Event, count: int) -> list[threading.Thread]:
    def keep_writing(index: int) -> None:
        while not stop.is_set():
            db.append_message("busy", "user", f"writer {index}")

    threads = [threading.Thread(target=keep_writing, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    return threads


def _fork_child_that_writes(db: SessionDB, marker: str) -> int:
    pid = os.fork()
    if pid == 0:  # the child: one write and one read, then leave without clean-up
        code = 1
        try:
            db.append_message("busy", "user", marker)
            code = 0 if db.message_count("busy") > 0 else 2
        finally:
            os._exit(code)
    return pid


def _wait(pid: int, deadline: float) -> int | None:
    """The child's exit code, or ``None`` (after killing it) if it is still running at ``deadline``."""
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return None


@needs_fork
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork() in a multi-threaded process
def test_children_forked_beside_writing_threads_write(tmp_path: Path) -> None:
    db = SessionDB(tmp_path / "state.db")
    db.create_session("busy", "cli")
    stop = threading.Event()
    threads = _writers(db, stop, count=3)
    outcomes: list[int | None] = []
    try:
        for index in range(CHILDREN):
            time.sleep(0.01)  # let the writers take the lock and queue again
            pid = _fork_child_that_writes(db, f"child {index}")
            outcomes.append(_wait(pid, time.monotonic() + CHILD_DEADLINE_S))
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    contents = {m["content"] for m in db.get_messages("busy")}
    db.close()
    assert outcomes == [0] * CHILDREN, f"children that hung (None) or failed: {outcomes}"
    assert {f"child {i}" for i in range(CHILDREN)} <= contents


class _Holder:
    """A holder registered for fork-pausing that records what it was asked to do."""

    def __init__(self, fails: bool = False) -> None:
        self.fails = fails
        self.calls: list[str] = []


def _pause(holder: _Holder) -> bool:
    holder.calls.append("pause")
    if holder.fails:
        raise RuntimeError("cannot pause")
    return True


def _resume(holder: _Holder) -> None:
    holder.calls.append("resume")


@needs_fork
def test_a_holder_that_cannot_pause_does_not_keep_the_others_from_pausing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from hermes_store.uow.fork_safety import quiesce_for_fork

    failing, after = _Holder(fails=True), _Holder()
    quiesce_for_fork(failing, _pause, _resume)
    quiesce_for_fork(after, _pause, _resume)
    with caplog.at_level("WARNING", logger="hermes_store.uow.fork_safety"):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
    os.waitpid(pid, 0)
    assert failing.calls == ["pause"]
    assert after.calls == ["pause", "resume"]
    assert "forking without pausing" in caplog.text
