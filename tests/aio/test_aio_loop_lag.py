"""The event loop is never blocked, measured the way a service feels it.

Another process holds SQLite's write lock for 2 s while 20 tasks of this process wait to
write. A ticker task in the same loop sleeps 10 ms at a time and records the largest gap
between its wake-ups. A store that waited for the lock on the loop (the sync store called
from a coroutine) shows a gap of at least the 1 s busy timeout — the control test below
proves the ticker sees that — while ``AsyncSessionDB`` must keep every gap under 20 ms.

Timing-sensitive by nature: garbage collection is paused during the measurement, a
measurement over 20 ms is repeated (a busy machine can deschedule the process for a few
ms; a store blocking its loop shows the 1 s busy timeout every time, which fails every
attempt outright), and the figures are printed.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from aio_support import Processes

from hermes_store import SessionDB
from hermes_store.aio import AsyncSessionDB

# Timed: scripts/check runs it after the parallel run, alone (a quiet part of the test process).
pytestmark = pytest.mark.serial

TICK_S = 0.01
MAX_GAP_S = 0.020
HOLD_S = 2.0
WAITING_WRITERS = 20
ATTEMPTS = 3
BLOCKED_S = 0.5


@pytest.fixture
def quiet_gc() -> Iterator[None]:
    """No collector pauses inside the measured window."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def _max_tick_gap_while(work: Awaitable[object]) -> float:
    """Run ``work`` while a ticker sleeps 10 ms in a loop; the largest gap it saw, in s."""
    stop = asyncio.Event()
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(TICK_S)
            now = time.perf_counter()
            gaps.append(now - last - TICK_S)
            last = now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    try:
        await work
    finally:
        stop.set()
        await tick
    return max(gaps)


def _hold_lock(processes: Processes, path: Path) -> None:
    holder = processes.spawn("hold_lock", path=str(path), seconds=HOLD_S)
    processes.expect(holder, "locked")


async def _writers_during_lock(append: Callable[[int], Awaitable[object]]) -> None:
    await asyncio.gather(*(append(n) for n in range(WAITING_WRITERS)))


def test_twenty_waiting_writers_never_block_the_loop(
    store_path: Path, processes: Processes, quiet_gc: None
) -> None:
    async def scenario(session: str) -> float:
        async with AsyncSessionDB(store_path) as db:
            await db.create_session(session, "cli")
            _hold_lock(processes, store_path)
            started = time.perf_counter()

            async def append(n: int) -> object:
                return await db.append_message(session, "user", f"written while locked {n}")

            gap = await _max_tick_gap_while(_writers_during_lock(append))
            waited = time.perf_counter() - started
            assert await db.message_count(session) == WAITING_WRITERS
            # The writers really waited for the other process (else nothing was measured).
            assert waited >= HOLD_S * 0.9, waited
            return gap

    # A machine busy with other work can deschedule this process for a few ms at any
    # moment; that is not the store blocking its loop. So a measurement over the bound is
    # repeated (up to ATTEMPTS in all), and every attempt must still stay far below the
    # 1 s busy timeout that a store waiting for the lock on the loop shows each time.
    gaps: list[float] = []
    for attempt in range(ATTEMPTS):
        gaps.append(asyncio.run(scenario(f"lag{attempt}")))
        if gaps[-1] < MAX_GAP_S:
            break
    print(
        f"\nloop lag under lock contention: max gaps {[round(g * 1000, 1) for g in gaps]} ms (loaded machine)"
    )
    assert all(gap < BLOCKED_S for gap in gaps), gaps
    assert gaps[-1] < MAX_GAP_S, f"the event loop stalled over 20 ms in every attempt: {gaps}"


def test_control_the_ticker_sees_a_store_that_blocks_the_loop(store_path: Path, processes: Processes) -> None:
    """The same scenario with the sync store called on the loop: the ticker must notice."""
    db = SessionDB(store_path)
    db.create_session("lag", "cli")
    _hold_lock(processes, store_path)

    async def append(n: int) -> object:
        return db.append_message("lag", "user", f"written while locked {n}")

    try:
        gap = asyncio.run(_max_tick_gap_while(_writers_during_lock(append)))
    finally:
        db.close()
    assert gap >= BLOCKED_S, f"a blocking store went unnoticed (max gap {gap * 1000:.1f} ms)"
