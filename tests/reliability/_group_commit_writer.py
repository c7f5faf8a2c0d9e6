"""Worker of ``test_reliability_group_commit.py``: ``python _group_commit_writer.py <db> <n> <run> [tasks]``.

``n`` threads append to one ``SessionDB`` (with ``tasks``: asyncio tasks on one
``AsyncSessionDB``, whose appends are batched on the loop) without pause (so their writes
share group commits): each to its own session and to one session they all share, one message at a
time or a turn of three with ``append_messages``; contents carry ``<run>`` so runs on
one file never repeat one. After each call returns, the thread
prints one line per acknowledged message — ``<id>\t<session>\t<content>`` — and flushes,
so every line the parent reads stands for a write the store called durable.
"""

from __future__ import annotations

import asyncio
import sys
import threading

from hermes_store import SessionDB
from hermes_store.aio import AsyncSessionDB

Acked = list[tuple[int, str, str]]


def _turn(run: str, n: int, seq: int) -> tuple[str, list[str]]:
    """Writer ``n``'s call number ``seq``: its session and contents (3: one append_messages)."""
    session = "shared" if seq % 3 == 0 else f"own{n}"
    if seq % 4 == 0:
        return session, [f"{run}-t{n}-{seq}-{k}" for k in range(3)]
    return session, [f"{run}-t{n}-{seq}"]


def _acknowledge(acked: Acked) -> None:
    sys.stdout.write("".join(f"{i}\t{s}\t{c}\n" for i, s, c in acked))
    sys.stdout.flush()


def _tool_messages(contents: list[str]) -> list[dict[str, object]]:
    return [{"role": "tool", "content": c, "tool_calls": [{"id": c}]} for c in contents]


async def _tasks_main(path: str, tasks: int, run: str) -> None:
    async with AsyncSessionDB(path) as db:
        for n in range(tasks):
            await db.create_session(f"own{n}", "cli")
        await db.create_session("shared", "cli")
        print("ready", flush=True)

        async def writer(n: int) -> None:
            seq = 0
            while True:
                seq += 1
                session, contents = _turn(run, n, seq)
                if len(contents) > 1:
                    ids = await db.append_messages(session, _tool_messages(contents))
                else:
                    ids = [await db.append_message(session, "user", contents[0])]
                _acknowledge([(i, session, c) for i, c in zip(ids, contents, strict=True)])

        await asyncio.gather(*(writer(n) for n in range(tasks)))


def main(path: str, threads: int, run: str) -> None:
    db = SessionDB(path)
    for n in range(threads):
        db.create_session(f"own{n}", "cli")
    db.create_session("shared", "cli")
    printing = threading.Lock()
    print("ready", flush=True)

    def writer(n: int) -> None:
        seq = 0
        while True:
            seq += 1
            session, contents = _turn(run, n, seq)
            if len(contents) > 1:
                ids = db.append_messages(session, _tool_messages(contents))
            else:
                ids = [db.append_message(session, "user", contents[0])]
            with printing:
                _acknowledge([(i, session, c) for i, c in zip(ids, contents, strict=True)])

    for n in range(threads):
        threading.Thread(target=writer, args=(n,), daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    if sys.argv[4:] == ["tasks"]:
        asyncio.run(_tasks_main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
    else:
        main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
