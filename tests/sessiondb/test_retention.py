"""Retention that never stops the agents: prune_sessions deletes in short batches.

A prune of months of history is many small transactions instead of one long one: each
batch holds whole sessions (a session always goes with all its messages) and at most
``MESSAGES_PER_BATCH`` messages, and the prune steps aside between batches so that the
agents writing meanwhile get their turn. Interrupted anywhere, it leaves whole sessions
only, and running it again finishes it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import event
from support import subprocess_env

from hermes_store import SessionDB
from hermes_store.repository import sessions as session_rows

DAY = 86400.0
OLD = time.time() - 200 * DAY


def fill(db: SessionDB, make_session, raw, count: int, messages: int, *, prefix: str = "old") -> list[str]:
    """``count`` ended sessions started 200 days ago, ``messages`` messages each."""
    ids = []
    for n in range(count):
        session_id = make_session(f"{prefix}-{n:03d}", started=OLD + n, ended=OLD + n + 1, reason="done")
        db.append_messages(session_id, [{"role": "user", "content": f"m{k}"} for k in range(messages)])
        ids.append(session_id)
    return ids


def deletes_of_sessions(db: SessionDB) -> list[str]:
    seen: list[str] = []
    event.listen(
        db.engine,
        "before_cursor_execute",
        lambda _c, _cur, statement, *_a: seen.append(statement)
        if statement.lstrip().upper().startswith("DELETE FROM SESSIONS")
        else None,
    )
    return seen


def test_batches_hold_whole_sessions_and_at_most_the_message_budget(
    db, make_session, raw, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_rows, "MESSAGES_PER_BATCH", 100)
    fill(db, make_session, raw, 10, 30)
    big = make_session("old-big", started=OLD + 50, ended=OLD + 51, reason="done")
    db.append_messages(big, [{"role": "user", "content": "x"}] * 250)  # more than a batch alone
    make_session("recent", started=time.time() - DAY, ended=time.time(), reason="done")
    statements = deletes_of_sessions(db)
    assert db.prune_sessions(older_than_days=90) == 11
    # 30 messages a session, 100 a batch: 3 + 3 + 3 + 1 sessions, then the big one alone.
    assert len(statements) == 5
    assert [s["id"] for s in db.search_sessions()] == ["recent"]
    assert db.message_count() == 0


def test_progress_counts_up_to_the_sessions_pruned(db, make_session, raw, monkeypatch) -> None:
    monkeypatch.setattr(session_rows, "MESSAGES_PER_BATCH", 40)
    fill(db, make_session, raw, 6, 20)
    reports: list[tuple[str, int, int | None]] = []
    assert db.prune_sessions(90, progress=lambda *r: reports.append(r)) == 6
    assert reports[0] == ("pruning sessions", 0, 6)
    assert [done for _step, done, _total in reports] == [0, 2, 4, 6]
    assert all(total == 6 for _step, _done, total in reports)


def test_an_agent_writing_during_a_prune_is_served_between_batches(
    db, make_session, raw, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's appends commit while the prune is still running: it never waits for
    the whole prune (which, as one transaction, it would)."""
    monkeypatch.setattr(session_rows, "MESSAGES_PER_BATCH", 20)
    fill(db, make_session, raw, 30, 10)
    db.create_session("live", "cli")
    pruning = threading.Event()
    done = threading.Event()
    during: list[int] = []

    def agent() -> None:
        pruning.wait(30)
        while not done.is_set():
            db.append_message("live", "user", "still here")
            during.append(len(during))
            time.sleep(0.002)

    statements = deletes_of_sessions(db)
    event.listen(db.engine, "before_cursor_execute", lambda *_a: pruning.set())
    thread = threading.Thread(target=agent)
    thread.start()
    try:
        db.prune_sessions(90)
        appended_while_pruning = len(during)
    finally:
        done.set()
        thread.join(30)
    assert len(statements) == 15  # two sessions of 10 messages a batch
    assert appended_while_pruning >= 3
    assert db.get_session("live")["message_count"] == db.message_count("live")  # type: ignore[index]


PRUNE_FOREVER = textwrap.dedent(
    """
    import sys, time
    from hermes_store import SessionDB
    from hermes_store.repository import sessions
    sessions.MESSAGES_PER_BATCH = 20
    db = SessionDB(sys.argv[1])
    print("pruning", flush=True)
    db.prune_sessions(90)
    print("done", flush=True)
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_killed_prune_leaves_whole_sessions_and_a_rerun_finishes(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        for n in range(60):
            session_id = f"old-{n:03d}"
            db.create_session(session_id, "cli")
            db.append_messages(session_id, [{"role": "user", "content": f"m{k}"} for k in range(10)])
            db.end_session(session_id, "done")
        db._conn.execute("UPDATE sessions SET started_at = ?", (OLD,))  # type: ignore[union-attr]
    child = subprocess.Popen(
        [sys.executable, "-c", PRUNE_FOREVER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "pruning"
    with SessionDB(path) as watcher:
        deadline = time.monotonic() + 60
        while watcher.session_count(include_archived=True) == 60 and time.monotonic() < deadline:
            time.sleep(0.005)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(30)
    child.stdout.close()
    with SessionDB(path) as db:
        left = db.session_count(include_archived=True)
        assert 0 < left < 60, "the kill should land part-way (the prune pauses between batches)"
        for row in db.search_sessions(limit=100):
            assert db.message_count(row["id"]) == 10 == row["message_count"]
        assert db.message_count() == 10 * left
        assert db.prune_sessions(90) == left
        assert db.session_count(include_archived=True) == 0 and db.message_count() == 0
