"""Worker processes of ``test_busy_commit.py``, run by path with the test's interpreter.

``reader <path> <rounds> <hold_s>``: plain sqlite3, in a loop: ``BEGIN``, a ``SELECT``
(which takes SQLite's SHARED lock), hold it ``hold_s`` seconds, ``COMMIT``.

``writer <path> <tag> <count> <ack file> <go file>``: a store on ``journal_mode=delete``
appends ``count`` messages, one acknowledgement line after each returned; once
``go file`` exists (every reader has finished) it writes and reads once more, printing
``after-ok``. Any exception is printed and the process exits 1.
"""

from __future__ import annotations

import sqlite3
import sys
import time
import warnings
from pathlib import Path


def reader(path: str, rounds: int, hold_s: float) -> None:
    conn = sqlite3.connect(path, timeout=60, isolation_level=None)
    for _ in range(rounds):
        conn.execute("BEGIN")
        conn.execute("SELECT COUNT(*) FROM messages").fetchone()
        time.sleep(hold_s)
        conn.execute("COMMIT")
        time.sleep(0.05)
    conn.close()


def writer(path: str, tag: str, count: int, acks: str, go: str) -> None:
    warnings.simplefilter("ignore")
    from hermes_store import SessionDB, create_engine

    db = SessionDB(engine=create_engine(path, journal_mode="delete"))
    with open(acks, "a", encoding="utf-8") as out:
        for n in range(count):
            message_id = db.append_message("shared", "user", f"{tag}-{n}")
            out.write(f"{tag}-{n}\t{message_id}\n")
            out.flush()
    deadline = time.monotonic() + 120
    while not Path(go).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    db.set_meta(f"after-{tag}", "written")
    assert db.get_meta(f"after-{tag}") == "written"
    assert len(db.get_messages("shared")) >= count
    db.close()
    print("after-ok", flush=True)


if __name__ == "__main__":
    kind, *args = sys.argv[1:]
    if kind == "reader":
        reader(args[0], int(args[1]), float(args[2]))
    else:
        writer(args[0], args[1], int(args[2]), args[3], args[4])
