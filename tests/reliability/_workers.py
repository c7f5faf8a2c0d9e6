"""Worker processes for the reliability tests: ``python _workers.py <kind> '<json config>'``.

Each kind is one role a real process plays against a shared ``state.db``:

* ``prepare`` — create the store at head with the shared sessions;
* ``writer`` — append messages, update token counts and rewrite a transcript with
  ``replace_messages``, acknowledging each after it returned;
* ``reader`` — search (word and trigram), list and export until told to stop;
* ``long_reader`` — an analytics script holding one read transaction the whole time;
* ``reopen`` — open the store after a crash, then write, read and search;
* ``first_open`` — open a store that may not exist yet, all at once with others;
* ``migrate`` — open (and so upgrade) a database, reporting how long it took;
* ``lock_holder`` — hold ``BEGIN IMMEDIATE`` until stdin closes or a line arrives;
* ``search`` — run searches one after another, each bounded by the parent's timeout;
* ``open_with_umask`` — create a store under a given umask.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _harness import (
    CJK_PHRASES,
    SHARED_SESSIONS,
    WORDS,
    message_text,
    parse_text,
    replace_tag,
    tool_calls_for,
)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__module__}.{type(exc).__name__}: {exc}"


def prepare(cfg: dict[str, Any]) -> None:
    from hermes_store import SessionDB

    with SessionDB(cfg["db"]) as db:
        for session_id in SHARED_SESSIONS:
            db.create_session(session_id, "shared")


def writer(cfg: dict[str, Any]) -> None:
    from hermes_store import SessionDB

    rng = random.Random(cfg["seed"])
    tag = cfg["tag"]
    own = f"own-{tag}"
    rewritten = f"rw-{tag}"
    db = SessionDB(cfg["db"])
    db.ensure_session(own, "worker")
    db.ensure_session(rewritten, "worker")
    ack = os.open(cfg["acks"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    if cfg.get("ready"):
        Path(cfg["ready"]).touch()
    if cfg.get("start"):
        start = Path(cfg["start"])
        while not start.exists():
            time.sleep(0.005)
    ops = int(cfg["ops"])
    latencies: list[float] = []
    errors: list[str] = []
    appends = token_updates = replaces = 0
    started = time.time()
    seq = 0
    while ops == 0 or seq < ops:
        seq += 1
        session = own if rng.random() < 0.5 else rng.choice(SHARED_SESSIONS)
        began = time.perf_counter()
        try:
            draw = rng.random()
            if draw < 0.1:
                db.update_token_counts(session, input_tokens=1)
                os.write(ack, f"t\t{session}\n".encode())
                token_updates += 1
            elif draw < 0.14:
                # Rewrite a whole transcript: it must never be seen half old, half new.
                count = rng.randint(1, 6)
                transcript = [
                    {"role": "user", "content": message_text(replace_tag(tag, seq, count, n), rng, 160)}
                    for n in range(count)
                ]
                db.replace_messages(rewritten, transcript)
                os.write(ack, f"r\t{rewritten}\t{seq}\n".encode())
                replaces += 1
            else:
                message_tag = f"{tag}-{seq}"
                calls = rng.choice((0, 0, 0, 1, 2))
                text = message_text(message_tag, rng, rng.choice((120, 240, 600, 2000)))
                message_id = db.append_message(
                    session,
                    "assistant" if calls else "user",
                    text,
                    tool_name="terminal" if calls else None,
                    tool_calls=tool_calls_for(message_tag, calls),
                )
                os.write(ack, f"m\t{message_tag}\t{message_id}\t{session}\t{calls}\n".encode())
                appends += 1
        except Exception as exc:
            errors.append(_describe(exc))
            if cfg.get("errors"):
                with open(cfg["errors"], "a", encoding="utf-8") as log:
                    log.write(f"{seq}\t{_describe(exc)}\n")
        latencies.append((time.perf_counter() - began) * 1000)
    finished = time.time()
    retries = db._uow.retry_count
    db.close()
    summary = {
        "operations": seq,
        "appends": appends,
        "token_updates": token_updates,
        "replaces": replaces,
        "latencies_ms": latencies,
        "errors": errors,
        "retries": retries,
        "started": started,
        "finished": finished,
    }
    Path(cfg["out"]).write_text(json.dumps(summary))


def reader(cfg: dict[str, Any]) -> None:
    """Search, list and export until the stop file appears; count torn or damaged reads."""
    from hermes_store import SessionDB

    rng = random.Random(cfg["seed"])
    stop = Path(cfg["stop"])
    db = SessionDB(cfg["db"])
    operations = torn = 0
    errors: list[str] = []
    examples: list[str] = []

    def check_messages(messages: list[dict[str, Any]]) -> None:
        nonlocal torn
        for message in messages:
            if parse_text(message["content"]) is None:
                torn += 1
                examples.append(f"half-written message {message['id']}")

    actions: list[Callable[[], None]] = []

    def word_search() -> None:
        for hit in db.search_messages(rng.choice(WORDS), limit=20):
            assert {"id", "session_id", "snippet", "context"} <= set(hit)

    def cjk_search() -> None:
        db.search_messages(rng.choice(CJK_PHRASES)[:4], limit=20)

    def listing() -> None:
        db.list_sessions_rich(limit=50, include_children=True)
        db.search_sessions(limit=50)

    def export_one() -> None:
        nonlocal torn
        sessions = [row["id"] for row in db.search_sessions(limit=100)]
        export = db.export_session(rng.choice(sessions)) if sessions else None
        if export is not None:
            if (export["message_count"] or 0) != len(export["messages"]):
                torn += 1
                examples.append(
                    f"export of {export['id']}: message_count={export['message_count']} "
                    f"but {len(export['messages'])} messages"
                )
            check_messages(export["messages"])

    def export_everything() -> None:
        for export in db.export_all():
            check_messages(export["messages"])

    actions = [word_search, cjk_search, listing, export_one, word_search, cjk_search, export_one]
    while not stop.exists():
        action = export_everything if operations % 25 == 24 else actions[operations % len(actions)]
        try:
            action()
        except Exception as exc:
            errors.append(_describe(exc))
        operations += 1
    db.close()
    Path(cfg["out"]).write_text(
        json.dumps({"operations": operations, "errors": errors, "torn": torn, "examples": examples[:10]})
    )


def long_reader(cfg: dict[str, Any]) -> None:
    """Hold one ORM read transaction from before the first write until the stop file appears."""
    from sqlalchemy import func, orm, select

    from hermes_store.db.engine import create_engine
    from hermes_store.models import Message

    stop = Path(cfg["stop"])
    engine = create_engine(cfg["db"])
    stable = True
    with orm.Session(engine) as session, session.begin():
        count = select(func.count()).select_from(Message)
        first = session.execute(count).scalar_one()
        print("holding", flush=True)
        began = time.monotonic()
        while not stop.exists():
            time.sleep(0.05)
            stable = stable and session.execute(count).scalar_one() == first
        held = time.monotonic() - began
    engine.dispose()
    Path(cfg["out"]).write_text(json.dumps({"held_s": held, "stable": stable, "count": first}))


def reopen(cfg: dict[str, Any]) -> None:
    from hermes_store import SessionDB

    rng = random.Random()
    tag = f"reopen{os.getpid()}x{time.time_ns()}"
    with SessionDB(cfg["db"]) as db:
        session = f"own-{tag}"
        db.create_session(session, "reopen")
        text = message_text(tag, rng)
        message_id = db.append_message(session, "user", text)
        assert [m["content"] for m in db.get_messages(session)] == [text]
        assert any(hit["id"] == message_id for hit in db.search_messages(tag, limit=1000))
        db.list_sessions_rich(limit=5)


def first_open(cfg: dict[str, Any]) -> None:
    """Wait for the start file, then open a store that may not exist yet and use it."""
    from hermes_store import SessionDB

    start = Path(cfg["start"])
    Path(cfg["ready"]).touch()
    while not start.exists():
        time.sleep(0.002)
    began = time.perf_counter()
    try:
        with SessionDB(cfg["db"]) as db:
            session = f"first-open-{cfg['n']}"
            db.create_session(session, "cli")
            db.append_message(session, "user", f"hello from {cfg['n']}")
        outcome: dict[str, Any] = {"ok": True}
    except Exception as exc:
        outcome = {"ok": False, "error": _describe(exc)}
    outcome["seconds"] = time.perf_counter() - began
    print(json.dumps(outcome), flush=True)


def migrate(cfg: dict[str, Any]) -> None:
    import alembic.command  # noqa: F401  (imported up front: time only the upgrade itself)

    from hermes_store import SessionDB

    print("opening", flush=True)
    began = time.perf_counter()
    db = SessionDB(cfg["db"])
    elapsed = time.perf_counter() - began
    db.close()
    print(f"done {elapsed:.4f}", flush=True)


def lock_holder(cfg: dict[str, Any]) -> None:
    conn = sqlite3.connect(cfg["db"], isolation_level=None, timeout=30)
    if cfg.get("wal"):
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    if cfg.get("seconds") is not None:
        time.sleep(float(cfg["seconds"]))
    else:
        sys.stdin.readline()
    conn.execute("ROLLBACK")
    conn.close()


def search(cfg: dict[str, Any]) -> None:
    """Run the query in each of ``query_files`` in turn, printing one JSON line per query
    (its hit count or error, and its seconds) as soon as it is answered."""
    from hermes_store import SessionDB

    db = SessionDB(cfg["db"])
    for query_file in cfg["query_files"]:
        query = Path(query_file).read_text(encoding="utf-8")
        began = time.perf_counter()
        outcome: dict[str, Any] = {}
        try:
            outcome["hits"] = len(db.search_messages(query))
        except Exception as exc:
            outcome["error"] = type(exc).__name__
            outcome["message"] = str(exc)
        outcome["seconds"] = time.perf_counter() - began
        print(json.dumps(outcome), flush=True)
    db.close()


def open_with_umask(cfg: dict[str, Any]) -> None:
    os.umask(int(cfg["umask"]))
    from hermes_store import SessionDB

    with SessionDB(cfg["db"]) as db:
        db.create_session("s", "cli")
        db.append_message("s", "user", "hello")
        modes = {
            suffix: os.stat(cfg["db"] + suffix).st_mode & 0o777
            for suffix in ("", "-wal", "-shm")
            if os.path.exists(cfg["db"] + suffix)
        }
    print(json.dumps(modes), flush=True)


KINDS: dict[str, Callable[[dict[str, Any]], None]] = {
    "prepare": prepare,
    "writer": writer,
    "reader": reader,
    "long_reader": long_reader,
    "reopen": reopen,
    "migrate": migrate,
    "first_open": first_open,
    "lock_holder": lock_holder,
    "search": search,
    "open_with_umask": open_with_umask,
}


def main() -> None:
    kind, raw = sys.argv[1], sys.argv[2]
    try:
        KINDS[kind](json.loads(raw))
    except Exception:
        traceback.print_exc()
        sys.exit(1)


if __name__ == "__main__":
    main()
