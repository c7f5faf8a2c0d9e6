"""Cancellation never half-writes.

Hundreds of ``append_message`` and ``replace_messages`` calls are cancelled after random
delays. Two kinds of cancellation are exercised:

* the caller's task is cancelled (a client went away, a timeout fired) — the documented
  behaviour: the caller sees ``CancelledError`` at once, and a call that had started is
  carried out whole anyway (so every started append is stored, exactly once);
* every task of the loop is cancelled, the store's own call tasks included (what a loop
  shutting down does) — a write then either commits whole or rolls back whole.

Afterwards messages, ``message_count`` and (on SQLite) both FTS5 indexes must agree
exactly, every transcript must be one whole ``replace_messages`` batch, and the store
must still be usable — by this loop and by another process that needs the write lock.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import sqlalchemy as sa
from aio_support import Processes

from hermes_store import SessionDB
from hermes_store.aio import AsyncSessionDB

OPERATIONS = 300
WAVE = 30
APPEND_SESSIONS = [f"a{n}" for n in range(4)]
REPLACE_SESSIONS = [f"r{n}" for n in range(4)]
_REPLACED = re.compile(r"^r(\d+)m(\d+)of(\d+)$")


async def _cancelled_at_random(
    db: AsyncSessionDB, rng: random.Random, cancel: Callable[[list[asyncio.Task[Any]]], None]
) -> tuple[set[int], set[int]]:
    """Run the operations in waves, cancelling at random delays; (started, appends) ids."""
    started: set[int] = set()
    appends: set[int] = set()

    def operation(k: int) -> Callable[[], Awaitable[object]]:
        if rng.random() < 0.6:
            appends.add(k)
            session = rng.choice(APPEND_SESSIONS)
            return lambda: db.append_message(session, "user", f"tok{k}")
        size = rng.randint(1, 5)
        batch = [{"role": "user", "content": f"r{k}m{i}of{size}"} for i in range(size)]
        session = rng.choice(REPLACE_SESSIONS)
        return lambda: db.replace_messages(session, batch)

    async def run(k: int, call: Callable[[], Awaitable[object]]) -> None:
        started.add(k)
        await call()

    for first in range(0, OPERATIONS, WAVE):
        tasks = [asyncio.create_task(run(k, operation(k))) for k in range(first, first + WAVE)]
        if rng.random() < 0.8:  # else cancelled before any of the wave has started
            await asyncio.sleep(rng.uniform(0, 0.004))
        cancel(tasks)
        await asyncio.gather(*tasks, return_exceptions=True)
    return started, appends


def _cancel_callers(tasks: list[asyncio.Task[Any]]) -> None:
    for task in tasks:
        task.cancel()


def _cancel_every_task(_tasks: list[asyncio.Task[Any]]) -> None:
    current = asyncio.current_task()
    for task in asyncio.all_tasks():
        if task is not current:
            task.cancel()


def _check_store(url: str, appends: set[int], must_have: set[int]) -> None:
    """Counters, transcripts and indexes agree; appends in ``must_have`` are stored once."""
    store = SessionDB(url=url)
    try:
        stored_appends: list[int] = []
        for session in APPEND_SESSIONS:
            contents = [m["content"] for m in store.get_messages(session)]
            assert store.get_session(session)["message_count"] == len(contents)
            stored_appends += [int(c[3:]) for c in contents]
        assert len(stored_appends) == len(set(stored_appends)), "an append was stored twice"
        assert set(stored_appends) <= appends
        assert must_have <= set(stored_appends), sorted(must_have - set(stored_appends))[:10]
        for session in REPLACE_SESSIONS:
            contents = [m["content"] for m in store.get_messages(session)]
            assert store.get_session(session)["message_count"] == len(contents)
            parts = [_REPLACED.match(c) for c in contents]
            assert all(parts), contents
            batches = {(p[1], p[3]) for p in parts if p}
            assert len(batches) <= 1, f"two replace_messages batches mixed: {contents}"
            if contents:
                ((_k, size),) = batches
                assert [int(p[2]) for p in parts if p] == list(range(int(size))), contents
        assert store.message_count() == sum(
            len(store.get_messages(s)) for s in APPEND_SESSIONS + REPLACE_SESSIONS
        )
        if store.engine.dialect.name == "sqlite":
            _check_fts(store.engine)
    finally:
        store.close()


def _check_fts(engine: sa.Engine) -> None:
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
        expected = connection.exec_driver_sql(
            "SELECT id, COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || "
            "COALESCE(tool_calls, '') FROM messages ORDER BY id"
        ).all()
        for table in ("messages_fts", "messages_fts_trigram"):
            connection.exec_driver_sql(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
            indexed = connection.exec_driver_sql(f"SELECT rowid, content FROM {table} ORDER BY rowid").all()
            assert indexed == expected, table


async def _prepare(db: AsyncSessionDB) -> None:
    for session in APPEND_SESSIONS + REPLACE_SESSIONS:
        await db.create_session(session, "cli")


def test_cancelled_callers_never_half_write_and_started_calls_complete(store_url: str) -> None:
    rng = random.Random(1207)

    async def scenario() -> tuple[set[int], set[int]]:
        async with AsyncSessionDB(store_url) as db:
            await _prepare(db)
            return await _cancelled_at_random(db, rng, _cancel_callers)

    started, appends = asyncio.run(scenario())
    assert 0 < len(started) < OPERATIONS, "the random delays should cancel some calls before they start"
    _check_store(store_url, appends, must_have=started & appends)


def test_cancelling_every_task_rolls_back_or_commits_whole(store_url: str, processes: Processes) -> None:
    rng = random.Random(4242)

    async def scenario() -> set[int]:
        async with AsyncSessionDB(store_url) as db:
            await _prepare(db)
            _started, appends = await _cancelled_at_random(db, rng, _cancel_every_task)
            # Still usable by this loop.
            await db.append_message(APPEND_SESSIONS[0], "user", f"tok{OPERATIONS}")
            appends.add(OPERATIONS)
            return appends

    appends = asyncio.run(scenario())
    _check_store(store_url, appends, must_have={OPERATIONS})
    if store_url.startswith("sqlite"):
        # No connection was left holding the write lock: another process takes it at once.
        holder = processes.spawn("hold_lock", path=sa.make_url(store_url).database, seconds=0)
        processes.expect(holder, "locked")
        processes.expect(holder, "released")


@pytest.mark.parametrize("delay", [0.0, 0.0005, 0.002])
def test_a_cancelled_caller_sees_cancelled_error_and_the_write_lands(store_url: str, delay: float) -> None:
    """The documented behaviour, for one call: CancelledError now, the write all the same."""

    async def scenario() -> tuple[bool, int]:
        async with AsyncSessionDB(store_url) as db:
            await db.create_session("one", "cli")
            task = asyncio.create_task(db.replace_messages("one", [{"role": "user", "content": "x"}] * 3))
            await asyncio.sleep(0)  # the call has started
            await asyncio.sleep(delay)
            task.cancel()
            try:
                await task
                cancelled = False
            except asyncio.CancelledError:
                cancelled = True
            await db.unit_of_work.drain()
            return cancelled, await db.message_count("one")

    cancelled, count = asyncio.run(scenario())
    assert count == 3
    assert cancelled or delay > 0


def test_a_call_whose_caller_was_cancelled_logs_its_failure(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Nobody awaits it any more, so its error must not vanish silently."""

    async def scenario() -> None:
        async with AsyncSessionDB(store_url) as db:
            task = asyncio.create_task(db.append_message("no-such-session", "user", "orphan"))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await db.unit_of_work.drain()

    with caplog.at_level("WARNING", logger="hermes_store.uow.async_completion"):
        asyncio.run(scenario())
    assert any("caller was cancelled failed" in r.getMessage() for r in caplog.records)
