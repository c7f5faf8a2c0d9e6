"""Large benchmark databases, built once per size and seed and cached under ``bench-results/``.

Appending 200,000 messages one call at a time would take longer than the whole benchmark, so
the read benchmarks run on databases that are bulk-loaded instead:

1. The seeded workload (:mod:`benchmarks.workload`) is generated once into a *source* file: plain
   tables holding every session and message row exactly as both stores will hold them (ids,
   REAL epoch timestamps, counters, titles, lineage, JSON text written with ``json.dumps``'
   defaults as upstream writes it). No indexes, no FTS: it takes seconds to write.
2. Each side creates its own schema on an empty file — ``BaselineStore(path)`` for the baseline,
   ``hermes_store.upgrade(path)`` for hermes_store — and then copies the source rows in with
   one ``INSERT … SELECT`` per table on a raw ``sqlite3`` connection. The v11 triggers of each
   schema fill both FTS5 indexes as the rows arrive. The two sides build in parallel processes.

Both files therefore hold identical rows, ids included, and differ only in what each side's
schema creation adds (``alembic_version`` for hermes_store). Files are named by a key made of
the sizes, the seed and :data:`BUILD_VERSION`; a file that exists is reused as it is.

Lineage is made realistic enough to exercise the listing's rules: every generated child session
makes its parent end with ``compression`` (half of them), ``branched`` (a fifth) or a plain end
reason, so listings hide some children, show branches, and project compression tips.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import sqlite3
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import closing
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from benchmarks.workload import GeneratedSession, generate_sessions

__all__ = [
    "BUILD_VERSION",
    "Dataset",
    "DatasetSpec",
    "checkpoint_and_size",
    "ensure_dataset",
    "remove_db",
]

BUILD_VERSION = 2
"""Bump when the generated rows or the build procedure change, so stale caches are not reused."""

_SOURCE_DDL = (
    """CREATE TABLE src_sessions (
        idx INTEGER PRIMARY KEY, id TEXT NOT NULL, source TEXT NOT NULL, model TEXT,
        parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL, end_reason TEXT,
        message_count INTEGER, tool_call_count INTEGER, input_tokens INTEGER, output_tokens INTEGER,
        title TEXT
    )""",
    """CREATE TABLE src_messages (
        id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, role TEXT NOT NULL, content TEXT,
        tool_call_id TEXT, tool_calls TEXT, tool_name TEXT, timestamp REAL NOT NULL,
        token_count INTEGER, finish_reason TEXT, reasoning TEXT
    )""",
    "CREATE TABLE src_info (key TEXT PRIMARY KEY, value TEXT)",
)
SESSION_COLUMNS = (
    "id, source, model, parent_session_id, started_at, ended_at, end_reason, message_count, "
    "tool_call_count, input_tokens, output_tokens, title"
)
MESSAGE_COLUMNS = (
    "id, session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, token_count, "
    "finish_reason, reasoning"
)


@dataclass(frozen=True, slots=True)
class DatasetSpec:
    """Shape of a bulk-loaded database: ``sessions - 1`` regular sessions plus one long one."""

    sessions: int
    messages_per_session: int
    long_session_messages: int
    seed: int

    @property
    def key(self) -> str:
        """File-name key: sizes, seed and build version."""
        return (
            f"{self.sessions}s-{self.messages_per_session}m-{self.long_session_messages}l"
            f"-seed{self.seed}-b{BUILD_VERSION}"
        )

    @property
    def message_total(self) -> int:
        """How many messages the database holds."""
        return (self.sessions - 1) * self.messages_per_session + self.long_session_messages


@dataclass(frozen=True, slots=True)
class Dataset:
    """A built pair of databases and what the benchmarks need to know about them."""

    spec: DatasetSpec
    source_path: Path
    baseline_path: Path
    store_path: Path
    long_session_id: str
    messages: int
    sessions: int
    build_seconds: float
    """Time spent building now (0.0 when every file came from the cache)."""


# --------------------------------------------------------------------------------------------
# Source rows
# --------------------------------------------------------------------------------------------


def _epoch_of(session_id: str) -> float:
    when = dt.datetime.strptime(session_id[:15], "%Y%m%d_%H%M%S").replace(tzinfo=dt.UTC)
    return when.timestamp()


def _message_rows(
    session: GeneratedSession, session_id: str, first_id: int, start: float, rng: random.Random
) -> tuple[list[tuple[Any, ...]], float, int, int, int]:
    rows: list[tuple[Any, ...]] = []
    t = start
    tool_calls = input_tokens = output_tokens = 0
    for offset, m in enumerate(session.messages):
        t += rng.uniform(2.0, 40.0)
        calls_json = json.dumps(m.tool_calls) if m.tool_calls else None
        tool_calls += len(m.tool_calls or ())
        if m.role == "assistant":
            output_tokens += m.token_count or 0
        else:
            input_tokens += m.token_count or 0
        rows.append(
            (
                first_id + offset,
                session_id,
                m.role,
                m.content,
                m.tool_call_id,
                calls_json,
                m.tool_name,
                t,
                m.token_count,
                m.finish_reason,
                m.reasoning,
            )
        )
    return rows, t, tool_calls, input_tokens, output_tokens


def _sessions_with_long(spec: DatasetSpec) -> Iterator[tuple[GeneratedSession, str]]:
    for session in generate_sessions(spec.sessions - 1, spec.messages_per_session, spec.seed):
        yield session, session.id
    (long_session,) = generate_sessions(1, spec.long_session_messages, spec.seed + 7919)
    yield long_session, "long_" + long_session.id


def build_source(spec: DatasetSpec, path: Path) -> str:
    """Generate the workload of ``spec`` into a plain source file; return the long session's id."""
    remove_db(path)
    rng = random.Random(f"hermes-bench-dataset:{spec.seed}")
    sessions: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    long_id = ""
    next_id = 1
    regular = spec.sessions - 1
    partial = path.with_name(path.name + ".partial")
    remove_db(partial)
    with closing(sqlite3.connect(partial, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        for ddl in _SOURCE_DDL:
            conn.execute(ddl)
        conn.execute("BEGIN")
        for index, (generated, session_id) in enumerate(_sessions_with_long(spec)):
            is_long = index == regular
            if is_long:
                long_id = session_id
                start = _epoch_of(generated.id) + spec.sessions * 97.0
            else:
                start = _epoch_of(generated.id) + rng.random()
            rows, last, calls, tokens_in, tokens_out = _message_rows(
                generated, session_id, next_id, start, rng
            )
            next_id += len(rows)
            conn.executemany(
                f"INSERT INTO src_messages ({MESSAGE_COLUMNS}) VALUES ({', '.join('?' * 11)})", rows
            )
            record: dict[str, Any] = {
                "id": session_id,
                "source": generated.source,
                "model": generated.model,
                "parent_session_id": None if is_long else generated.parent_id,
                "started_at": start,
                "last": last,
                "ended_at": None,
                "end_reason": None,
                "message_count": len(rows),
                "tool_call_count": calls,
                "input_tokens": tokens_in,
                "output_tokens": tokens_out,
                "title": None if is_long else generated.title,
                "live": is_long or index >= regular * 0.97,
            }
            sessions.append(record)
            by_id[session_id] = record
        # Lineage: a parent ends before its first child starts, for one of three reasons.
        first_child: dict[str, float] = {}
        for record in sessions:
            parent = record["parent_session_id"]
            if parent is not None:
                first_child[parent] = min(first_child.get(parent, record["started_at"]), record["started_at"])
        for record in sessions:
            if record["id"] in first_child:
                roll = rng.random()
                record["end_reason"] = (
                    "compression" if roll < 0.5 else "branched" if roll < 0.7 else "user_exit"
                )
                record["ended_at"] = max(record["last"], first_child[record["id"]] - 1.0)
            elif not record["live"]:
                record["end_reason"] = "user_exit"
                record["ended_at"] = record["last"] + 30.0
        conn.executemany(
            f"INSERT INTO src_sessions (idx, {SESSION_COLUMNS}) VALUES ({', '.join('?' * 13)})",
            [
                (
                    i,
                    r["id"],
                    r["source"],
                    r["model"],
                    r["parent_session_id"],
                    r["started_at"],
                    r["ended_at"],
                    r["end_reason"],
                    r["message_count"],
                    r["tool_call_count"],
                    r["input_tokens"],
                    r["output_tokens"],
                    r["title"],
                )
                for i, r in enumerate(sessions)
            ],
        )
        conn.executemany(
            "INSERT INTO src_info (key, value) VALUES (?, ?)",
            [("long_session_id", long_id), ("messages", str(next_id - 1)), ("sessions", str(len(sessions)))],
        )
        conn.execute("COMMIT")
    os.replace(partial, path)
    return long_id


def read_info(source_path: Path) -> dict[str, str]:
    """The ``src_info`` key/value pairs of a source file."""
    with closing(sqlite3.connect(source_path)) as conn:
        return dict(conn.execute("SELECT key, value FROM src_info").fetchall())


# --------------------------------------------------------------------------------------------
# Per-side databases
# --------------------------------------------------------------------------------------------


def remove_db(path: Path) -> None:
    """Delete a database file and its ``-wal``/``-shm``/``-journal`` sidecars, if present."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        candidate = Path(str(path) + suffix)
        if candidate.exists():
            candidate.unlink()


def create_empty(kind: str, path: Path) -> None:
    """Create an empty database at ``path`` with ``kind``'s own schema creation."""
    if kind == "baseline":
        from benchmarks.baseline_sqlite import BaselineStore

        BaselineStore(path).close()
    elif kind == "store":
        import hermes_store

        hermes_store.upgrade(path)
    else:
        raise ValueError(f"unknown side {kind!r}")


def bulk_copy(path: Path, source: Path, *, max_message_id: int | None = None) -> None:
    """Copy the source rows into the database at ``path`` (whose triggers index them).

    With ``max_message_id``, only messages up to that id and the sessions they belong to.
    """
    message_where = "" if max_message_id is None else f" WHERE id <= {int(max_message_id)}"
    session_where = (
        ""
        if max_message_id is None
        else f" WHERE id IN (SELECT DISTINCT session_id FROM src.src_messages{message_where})"
    )
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        # No journal while loading a scratch file (it is renamed into place only when complete):
        # in WAL mode the one big transaction would write every page twice. WAL is restored after.
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA cache_size=-262144")
        conn.execute("ATTACH DATABASE ? AS src", (str(source),))
        conn.execute("BEGIN")
        conn.execute(
            f"INSERT INTO sessions ({SESSION_COLUMNS}) SELECT {SESSION_COLUMNS} FROM src.src_sessions"
            f"{session_where} ORDER BY idx"
        )
        conn.execute(
            f"INSERT INTO messages ({MESSAGE_COLUMNS}) SELECT {MESSAGE_COLUMNS} FROM src.src_messages"
            f"{message_where} ORDER BY id"
        )
        conn.execute("COMMIT")
        conn.execute("DETACH DATABASE src")
        conn.execute("PRAGMA journal_mode=WAL")


def build_side(kind: str, source: str, out: str) -> float:
    """Create ``kind``'s schema in a fresh file, bulk-load the source into it, move it to ``out``.

    Runs in a worker process; returns the seconds it took.
    """
    started = time.perf_counter()
    target = Path(out)
    partial = target.with_name(target.name + ".partial")
    remove_db(partial)
    create_empty(kind, partial)
    bulk_copy(partial, Path(source))
    remove_db(target)
    os.replace(partial, target)
    for suffix in ("-wal", "-shm"):
        stale = Path(str(partial) + suffix)
        if stale.exists():
            stale.unlink()
    return time.perf_counter() - started


def ensure_dataset(spec: DatasetSpec, cache_dir: Path, *, log: Any = print) -> Dataset:
    """Return the dataset of ``spec``, building whatever part is missing from ``cache_dir``."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    source = cache_dir / f"source-{spec.key}.db"
    baseline = cache_dir / f"baseline-{spec.key}.db"
    store = cache_dir / f"store-{spec.key}.db"
    started = time.perf_counter()
    built = False
    if not source.exists():
        log(f"  generating {spec.message_total:,} messages in {spec.sessions:,} sessions -> {source.name}")
        build_source(spec, source)
        built = True
    missing = [(kind, path) for kind, path in (("baseline", baseline), ("store", store)) if not path.exists()]
    if missing:
        log(f"  bulk-loading {', '.join(kind for kind, _ in missing)} database(s) in parallel")
        with ProcessPoolExecutor(max_workers=len(missing), mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(build_side, kind, str(source), str(path)) for kind, path in missing]
            for (kind, _), future in zip(missing, futures, strict=True):
                log(f"    {kind}: {future.result():.1f} s")
        built = True
    info = read_info(source)
    return Dataset(
        spec=spec,
        source_path=source,
        baseline_path=baseline,
        store_path=store,
        long_session_id=info["long_session_id"],
        messages=int(info["messages"]),
        sessions=int(info["sessions"]),
        build_seconds=time.perf_counter() - started if built else 0.0,
    )


def checkpoint_and_size(path: Path) -> int:
    """Checkpoint the WAL into the main file (TRUNCATE) and return the file's size in bytes."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size
