"""Appends of concurrent tasks on one ``AsyncSessionDB`` (SQLite): one batch, one commit.

``uow/async_write_batch.py`` queues appends on the loop while a batch commits and sends
the next batch to one worker thread; these tests count real commits with the engine's
``commit`` event and read every row back with sqlite3.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from sqlalchemy import event

from hermes_store.aio import AsyncSessionDB
from hermes_store.uow import async_write_batch


@contextmanager
def _write_lock_held(path: Path) -> Iterator[None]:
    """SQLite's write lock on ``path``, held by another connection (another process, as far
    as SQLite knows) until the block ends."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def _rows(path: Path) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(path)) as check:
        return check.execute("SELECT session_id, content FROM messages ORDER BY id").fetchall()


def test_appends_of_many_tasks_share_commits_and_keep_each_sessions_order(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    commits: list[str] = []

    def note_commit(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        if statement == "COMMIT":
            commits.append(statement)

    async def scenario() -> list[int]:
        async with AsyncSessionDB(path) as db:
            event.listen(db.sync_engine, "before_cursor_execute", note_commit)
            for n in range(20):
                await db.create_session(f"s{n}", "test")
            commits.clear()

            async def task(n: int) -> list[int]:
                return [await db.append_message(f"s{n}", "user", f"s{n} #{k}") for k in range(10)]

            ids = await asyncio.gather(*(task(n) for n in range(20)))
            return [i for per_task in ids for i in per_task]

    ids = asyncio.run(scenario())
    assert len(set(ids)) == 200
    # 200 appends, one outstanding per task: the tasks a batch's end wakes all submit
    # before the next batch goes, so batches of 20 — 10 commits (not 1, 19, 1, 19, …).
    assert len(commits) <= 12, len(commits)
    rows = _rows(path)
    assert len(rows) == 200
    for n in range(20):
        assert [c for s, c in rows if s == f"s{n}"] == [f"s{n} #{k}" for k in range(10)]
    with closing(sqlite3.connect(path)) as check:
        assert check.execute("SELECT MIN(message_count), MAX(message_count) FROM sessions").fetchone() == (
            10,
            10,
        )


def test_a_bad_append_in_a_batch_fails_alone(tmp_path: Path) -> None:
    path = tmp_path / "state.db"

    async def scenario() -> list[object]:
        async with AsyncSessionDB(path) as db:
            await db.create_session("here", "test")
            calls: list[Awaitable[object]] = [db.append_message("here", "user", f"m{n}") for n in range(5)]
            calls.insert(2, db.append_message("missing", "user", "nowhere"))
            calls.insert(4, db.append_messages("missing", [{"role": "user", "content": "x"}]))
            return await asyncio.gather(*calls, return_exceptions=True)

    outcomes = asyncio.run(scenario())
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    # Upstream's error for an unknown session: the driver's IntegrityError.
    assert len(errors) == 2 and all(isinstance(e, sqlite3.IntegrityError) for e in errors), outcomes
    assert [c for _s, c in _rows(path)] == [f"m{n}" for n in range(5)]


def test_a_burst_larger_than_one_batch_is_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(async_write_batch, "MAX_BATCH", 7)
    path = tmp_path / "state.db"
    statements: list[str] = []

    async def scenario() -> None:
        async with AsyncSessionDB(path) as db:
            await db.create_session("s", "test")
            event.listen(
                db.sync_engine,
                "before_cursor_execute",
                lambda _conn, _cursor, statement, *_rest: statements.append(statement),
            )
            await asyncio.gather(*(db.append_message("s", "user", f"m{n}") for n in range(30)))

    asyncio.run(scenario())
    assert [c for _s, c in _rows(path)] == [f"m{n}" for n in range(30)]
    # 30 appends submitted together, at most 7 a batch: exactly 7 + 7 + 7 + 7 + 2, one
    # commit each (unbatched, there would be 30; one unbounded batch, 1).
    assert statements.count("COMMIT") == 5


def test_validation_errors_come_before_anything_is_queued(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with AsyncSessionDB(tmp_path / "state.db") as db:
            await db.create_session("s", "test")
            with pytest.raises(TypeError):
                await db.append_message("s", 3)  # type: ignore[arg-type]
            with pytest.raises(TypeError):
                await db.append_message(None, "user")  # type: ignore[arg-type]
            with pytest.raises(TypeError):
                await db.append_messages("s", ["not a dict"])  # type: ignore[list-item]
            assert await db.append_messages("s", []) == []
            assert await db.message_count("s") == 0

    asyncio.run(scenario())


def test_a_cancelled_caller_does_not_stop_its_queued_append(tmp_path: Path) -> None:
    path = tmp_path / "state.db"

    async def scenario() -> None:
        db = AsyncSessionDB(path)
        await db.create_session("s", "test")
        calls = [asyncio.ensure_future(db.append_message("s", "user", f"m{n}")) for n in range(10)]
        await asyncio.sleep(0)
        for call in calls[3:6]:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        await db.close()  # waits for every write in flight, cancelled callers' included

    asyncio.run(scenario())
    assert [c for _s, c in _rows(path)] == [f"m{n}" for n in range(10)]


def test_appends_after_close_are_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        db = AsyncSessionDB(tmp_path / "state.db")
        await db.create_session("s", "test")
        await db.close()
        with pytest.raises(RuntimeError, match="closed"):
            await db.append_message("s", "user", "late")

    asyncio.run(scenario())


def test_reads_do_not_wait_behind_writes_stuck_on_another_processs_lock(tmp_path: Path) -> None:
    path = tmp_path / "state.db"

    async def scenario() -> None:
        async with AsyncSessionDB(path) as db:
            await db.create_session("s", "test")
            with _write_lock_held(path):
                # More waiting writes than the writers' worker threads: every one is taken.
                writes = [asyncio.ensure_future(db.set_meta(f"k{n}", "v")) for n in range(40)]
                await asyncio.sleep(0.2)
                session = await asyncio.wait_for(db.get_session("s"), timeout=20)
                assert session is not None and session["id"] == "s"
                assert not all(write.done() for write in writes)  # still waiting for the lock
            await asyncio.gather(*writes)
            assert await db.get_meta("k39") == "v"

    asyncio.run(scenario())


def test_a_batch_that_meets_another_processs_lock_is_retried_whole(tmp_path: Path) -> None:
    path = tmp_path / "state.db"

    async def scenario() -> None:
        async with AsyncSessionDB(path) as db:
            await db.create_session("s", "test")
            with _write_lock_held(path):
                appends = [asyncio.ensure_future(db.append_message("s", "user", f"m{n}")) for n in range(30)]
                # Well past SQLite's 1 s busy timeout: the first attempt fails and is retried.
                await asyncio.sleep(2.5)
                assert not any(append.done() for append in appends)
            ids = await asyncio.gather(*appends)
            assert len(set(ids)) == 30
            assert db.unit_of_work.retry_count >= 1
            assert await db.message_count("s") == 30

    asyncio.run(scenario())
    assert [c for _s, c in _rows(path)] == [f"m{n}" for n in range(30)]


def test_writes_queued_when_the_threads_are_gone_all_fail_and_drain_returns(tmp_path: Path) -> None:
    """More writes than one batch takes, submitted after the worker threads stopped: every
    one fails with the shutdown's error (none is left waiting), and ``drain`` returns."""
    from hermes_store import SessionDB, create_engine
    from hermes_store.uow.unit_of_work import UnitOfWork
    from hermes_store.uow.worker_threads import WorkerThreads

    path = tmp_path / "state.db"
    SessionDB(path).close()
    unit_of_work = UnitOfWork(create_engine(path), owns_engine=True)

    async def scenario() -> list[BaseException | None]:
        threads = WorkerThreads(1, "gone")
        threads.shutdown()
        batcher = async_write_batch.WriteBatcher(unit_of_work, threads)
        futures = [
            batcher.submit(lambda connection: None, "nothing") for _ in range(async_write_batch.MAX_BATCH + 5)
        ]
        await asyncio.wait_for(batcher.drain(), 5)
        return [future.exception() for future in futures]

    try:
        errors = asyncio.run(scenario())
    finally:
        unit_of_work.close()
    assert len(errors) == async_write_batch.MAX_BATCH + 5
    assert all(isinstance(error, RuntimeError) and "after shutdown" in str(error) for error in errors)
