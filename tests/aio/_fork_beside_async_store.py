"""Run by test_aio_fork.py: fork during a SQLite write, beside a live PostgreSQL AsyncSessionDB.

argv: the PostgreSQL URL, the SQLite file. The async store is opened first, so it is
registered for fork-pausing before the SQLite store. A thread holds the SQLite store's
write for a second; the fork starts during it. The child appends once to the SQLite store
and exits 0 on success, 1 on an error (printed). Prints one JSON line: the child's exit code.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
import traceback

from hermes_store import SessionDB
from hermes_store.aio import AsyncSessionDB

WRITE_HELD_S = 1.0


def _long_write(db: SessionDB, started: threading.Event) -> None:
    def work(connection: object) -> None:
        started.set()
        time.sleep(WRITE_HELD_S)  # the write lock is held meanwhile

    db.append_message("s", "user", "before the long write")
    db.unit_of_work.write_connection(work, "holding the write lock")


def _child(db: SessionDB) -> None:
    code = 1
    try:
        db.append_message("s", "user", "from the child")
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


async def main(pg_url: str, sqlite_path: str) -> None:
    async_db = await AsyncSessionDB(url=pg_url).open()
    await async_db.create_session("async", "cli")
    db = SessionDB(sqlite_path)
    db.create_session("s", "cli")
    started = threading.Event()
    writer = threading.Thread(target=_long_write, args=(db, started))
    writer.start()
    started.wait()
    pid = os.fork()
    if pid == 0:
        _child(db)
    writer.join()
    _, status = os.waitpid(pid, 0)
    await async_db.create_session("async after", "cli")  # the parent's async store still works
    await async_db.close()
    db.close()
    print(json.dumps({"child": os.waitstatus_to_exitcode(status)}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
