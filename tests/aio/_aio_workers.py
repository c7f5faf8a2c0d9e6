"""Other processes for the asyncio tests: ``python _aio_workers.py KIND JSON``.

* ``hold_lock`` — take SQLite's write lock (``BEGIN IMMEDIATE``), print ``locked``, hold
  it for ``seconds``, commit, print ``released``;
* ``sync_writer`` / ``async_writer`` — after ``go_file`` appears, append ``count``
  messages tagged ``tag-<n>`` to ``session`` through ``SessionDB`` / ``AsyncSessionDB``;
  print ``ok <n>`` or ``error <repr>``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any


def hold_lock(config: dict[str, Any]) -> None:
    connection = sqlite3.connect(config["path"], isolation_level=None, timeout=10)
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("INSERT OR REPLACE INTO state_meta(key, value) VALUES ('held-by', 'other process')")
    print("locked", flush=True)
    time.sleep(config["seconds"])
    connection.execute("COMMIT")
    print("released", flush=True)


def _wait_for_go(config: dict[str, Any]) -> None:
    go = Path(config["go_file"])
    while not go.exists():
        time.sleep(0.005)


def sync_writer(config: dict[str, Any]) -> None:
    from hermes_store import SessionDB

    store = SessionDB(url=config["url"])
    print("ready", flush=True)
    _wait_for_go(config)
    done = 0
    try:
        for index in range(config["count"]):
            store.append_message(config["session"], "user", f"{config['tag']}-{index} load message")
            done += 1
        print(f"ok {done}", flush=True)
    except Exception as exc:
        print(f"error {exc!r}", flush=True)
    finally:
        store.close()


def async_writer(config: dict[str, Any]) -> None:
    from hermes_store.aio import AsyncSessionDB

    async def main() -> None:
        async with AsyncSessionDB(url=config["url"]) as store:
            print("ready", flush=True)
            await asyncio.to_thread(_wait_for_go, config)

            async def one(index: int) -> None:
                await store.append_message(config["session"], "user", f"{config['tag']}-{index} load message")

            results = await asyncio.gather(*(one(i) for i in range(config["count"])), return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            print(f"error {errors[0]!r}" if errors else f"ok {len(results)}", flush=True)

    asyncio.run(main())


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    {"hold_lock": hold_lock, "sync_writer": sync_writer, "async_writer": async_writer}[sys.argv[1]](
        json.loads(sys.argv[2])
    )
