"""Load: 200 concurrent tasks in one process plus 4 other processes on one store.

Two of the other processes write through ``SessionDB`` and two through their own
``AsyncSessionDB``, all to one shared session and each to a session of its own, starting
together. Afterwards: no call raised, every message is stored exactly once, and the
counters equal the rows — on SQLite (one file, WAL) and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

from aio_support import Processes

from hermes_store import SessionDB
from hermes_store.aio import AsyncSessionDB

TASKS = 200
APPENDS_PER_TASK = 3
OTHER_PROCESSES = [
    ("sync_writer", "p0"),
    ("sync_writer", "p1"),
    ("async_writer", "p2"),
    ("async_writer", "p3"),
]
APPENDS_PER_PROCESS = 150
_TAG = re.compile(r"^(\w+)-(\d+) load message$")


def test_two_hundred_tasks_and_four_processes_lose_nothing(
    store_url: str, processes: Processes, tmp_path: Path
) -> None:
    with SessionDB(url=store_url) as setup:
        setup.create_session("shared", "cli")
        for _kind, tag in OTHER_PROCESSES:
            setup.create_session(f"own-{tag}", "cli")
    go = tmp_path / "go"
    others = []
    for index, (kind, tag) in enumerate(OTHER_PROCESSES):
        session = "shared" if index % 2 == 0 else f"own-{tag}"
        others.append(
            processes.spawn(
                kind, url=store_url, session=session, tag=tag, count=APPENDS_PER_PROCESS, go_file=str(go)
            )
        )
    for process in others:
        processes.expect(process, "ready")

    async def scenario() -> list[BaseException]:
        async with AsyncSessionDB(store_url) as db:

            async def task(n: int) -> None:
                for index in range(APPENDS_PER_TASK):
                    await db.append_message("shared", "user", f"t{n}-{index} load message")

            go.touch()
            results = await asyncio.gather(*(task(n) for n in range(TASKS)), return_exceptions=True)
            return [r for r in results if isinstance(r, BaseException)]

    started = time.perf_counter()
    errors = asyncio.run(scenario())
    outcomes = [processes.expect(process, "") for process in others]
    elapsed = time.perf_counter() - started
    assert errors == []
    assert outcomes == [f"ok {APPENDS_PER_PROCESS}"] * len(OTHER_PROCESSES)

    expected = {(f"t{n}", i) for n in range(TASKS) for i in range(APPENDS_PER_TASK)}
    expected |= {(tag, i) for _kind, tag in OTHER_PROCESSES for i in range(APPENDS_PER_PROCESS)}
    with SessionDB(url=store_url) as check:
        stored: list[tuple[str, int]] = []
        for session in ["shared", *(f"own-{tag}" for _kind, tag in OTHER_PROCESSES)]:
            rows = check.get_messages(session)
            assert check.get_session(session)["message_count"] == len(rows), session
            for row in rows:
                match = _TAG.match(row["content"])
                assert match, row["content"]
                stored.append((match[1], int(match[2])))
        assert len(stored) == len(set(stored)), "a message was stored twice"
        assert set(stored) == expected
        assert check.message_count() == len(expected)
    total = len(expected)
    print(f"\nload: {total} appends from 200 tasks + 4 processes in {elapsed:.1f} s (loaded machine)")
