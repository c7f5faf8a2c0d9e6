"""Worker of ``test_reliability_group_commit.py``: ``python _group_commit_writer.py <db> <threads> <run>``.

Several threads append to one ``SessionDB`` without pause (so their writes share group
commits): each to its own session and to one session they all share, one message at a
time or a turn of three with ``append_messages``; contents carry ``<run>`` so runs on
one file never repeat one. After each call returns, the thread
prints one line per acknowledged message — ``<id>\t<session>\t<content>`` — and flushes,
so every line the parent reads stands for a write the store called durable.
"""

from __future__ import annotations

import sys
import threading

from hermes_store import SessionDB


def main(path: str, threads: int, run: str) -> None:
    db = SessionDB(path)
    for n in range(threads):
        db.create_session(f"own{n}", "cli")
    db.create_session("shared", "cli")
    printing = threading.Lock()
    print("ready", flush=True)

    def acknowledge(acked: list[tuple[int, str, str]]) -> None:
        with printing:
            sys.stdout.write("".join(f"{i}\t{s}\t{c}\n" for i, s, c in acked))
            sys.stdout.flush()

    def writer(n: int) -> None:
        seq = 0
        while True:
            seq += 1
            session = "shared" if seq % 3 == 0 else f"own{n}"
            if seq % 4 == 0:
                contents = [f"{run}-t{n}-{seq}-{k}" for k in range(3)]
                ids = db.append_messages(
                    session, [{"role": "tool", "content": c, "tool_calls": [{"id": c}]} for c in contents]
                )
                acknowledge([(i, session, c) for i, c in zip(ids, contents, strict=True)])
            else:
                content = f"{run}-t{n}-{seq}"
                acknowledge([(db.append_message(session, "user", content), session, content)])

    for n in range(threads):
        threading.Thread(target=writer, args=(n,), daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
