"""Retention that never stops the agents: prune_sessions deletes in short batches.

A prune of months of history is many small transactions instead of one long one: each
batch holds whole sessions and at most a budget of messages (``MESSAGES_PER_BATCH`` at
most, smaller when batches take longer than they should: the budget is sized by time),
a session with more messages than a batch loses them a batch at a time before it goes,
and the prune steps aside between batches so that the agents writing meanwhile get their
turn. Interrupted anywhere, it leaves sessions whose messages are still in order (the
oldest gone first), and running it again finishes it.
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
from hermes_store.api.features import sweeps
from hermes_store.repository import sessions as session_rows

DAY = 86400.0
OLD = time.time() - 200 * DAY


@pytest.fixture(autouse=True)
def fixed_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of exactly the budget the test sets: no batch is ever slow enough to be
    made smaller (the sizing by time has tests of its own below)."""
    monkeypatch.setattr(sweeps, "BATCH_TARGET_S", 1e9)


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
    # 30 messages a session, 100 a batch: 3 + 3 + 3 + 1 sessions, then the big one's
    # messages a batch at a time (100, 100) and the session with its last 50.
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


def test_the_budget_follows_the_time_batches_take(monkeypatch: pytest.MonkeyPatch) -> None:
    target = 0.025
    monkeypatch.setattr(sweeps, "BATCH_TARGET_S", target)
    budget = sweeps.TimedBudget(high=2000)
    assert budget.size == sweeps.FIRST_BATCH
    budget.adapt(target / 10)  # fast: at most doubled
    assert budget.size == 2 * sweeps.FIRST_BATCH
    budget.adapt(target * 4)  # four times too slow: a quarter
    assert budget.size == sweeps.FIRST_BATCH // 2
    for _ in range(20):
        budget.adapt(10.0)
    assert budget.size == sweeps.SMALLEST_BATCH
    for _ in range(20):
        budget.adapt(0.0)
    assert budget.size == 2000


def _prune_once(db: SessionDB, budget: int) -> list[str] | None:
    cutoff = time.time() - 90 * DAY
    return db.unit_of_work.write_connection(
        lambda connection: session_rows.prune_batch(connection, cutoff, None, budget), "pruning"
    )


def test_a_session_larger_than_a_batch_goes_a_batch_at_a_time(tmp_path: Path) -> None:
    with SessionDB(tmp_path / "state.db") as db:
        big = db.create_session("old-big", "cli")
        db.append_messages(big, [{"role": "user", "content": f"walrus {k}"} for k in range(250)])
        db.end_session(big, "done")
        db._conn.execute("UPDATE sessions SET started_at = ?", (OLD,))  # type: ignore[union-attr]
        assert _prune_once(db, 100) is None and db.message_count(big) == 150
        assert [m["content"] for m in db.get_messages(big)][:1] == ["walrus 100"]  # oldest first
        assert _prune_once(db, 100) is None and db.message_count(big) == 50
        assert _prune_once(db, 100) == [big]
        assert db.get_session(big) is None and db.message_count() == 0
        assert db.search_messages("walrus") == []


def test_slow_batches_are_made_smaller(db, make_session, raw, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweeps, "BATCH_TARGET_S", 0.0)  # every batch is too slow
    fill(db, make_session, raw, 10, 30)
    statements = deletes_of_sessions(db)
    assert db.prune_sessions(older_than_days=90) == 10
    # The first batch takes 200 messages' worth (6 sessions); then one session at a time.
    assert len(statements) == 5
    assert db.message_count() == 0
