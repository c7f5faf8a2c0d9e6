"""``hermes-store copy`` of a SQLite store into PostgreSQL, timed as the whole command,
beside a bare load of the same rows on the same server.

    python -m benchmarks.bench_copy --messages 200000 --pg-url postgresql+psycopg://postgres@127.0.0.1/postgres

1. The seeded workload (:mod:`benchmarks.workload`, the same rows as the other
   benchmarks: Zipf prose, ~10 % CJK, ~30 % tool traffic, lineage) of ``--messages``
   messages — sessions of 20 plus one of 500 — is generated once into a source file and
   bulk-loaded into a hermes_store SQLite file (:mod:`benchmarks.datasets`; its FTS5
   triggers index the rows). Both are cached under ``--cache`` and reused.
2. A fresh PostgreSQL database is created, and ``hermes-store copy STORE URL --json`` is
   run in a child process and timed from start to exit: start-up, schema creation,
   COPY of every row, index builds, verification.
3. The bare load, in the same run, into another fresh database: the head schema as
   ``hermes-store`` creates it, then every secondary index (the non-unique ones, of every
   table) and foreign key dropped, one ``COPY`` per table of every row straight from the
   SQLite file (no batches, no bookkeeping, no verification), then each index of the
   head schema built — as many at a time as the copy builds them
   (``copy_target.INDEX_BUILDERS``) and in the copy's order (``copy_target.build_order``),
   each on a connection of its own with the copy's ``maintenance_work_mem``, each build
   timed — then the foreign keys. It is the floor a copy of these rows into this schema
   cannot beat on this server. The copy and the bare load alternate (``--rounds``), so
   both sides see the same load.
   ``--index-costs N`` then measures, on that loaded database, what appending ``N``
   messages writes to each index and which index each public call's statements read
   (:mod:`benchmarks.message_indexes`).
4. ``--phases`` also runs the copy in-process with a progress function that notes when
   each step starts and ends (sessions, messages, tables, metadata, indexes, verify):
   where its time goes.
5. ``--compare-formats N`` first times the messages step alone for text and binary COPY
   (the first N messages, in-process, alternating, each into its own fresh database).

Prints the copy's total, the bare load's total, their ratio against :data:`TARGET_RATIO`,
each index's build time, and messages per second against the 20,000 target, with the load
averages before and after each (the machine may be shared); ``--json`` also writes the
figures, with the bare load's heap, TOAST and index sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from benchmarks.datasets import DatasetSpec, build_side, build_source

TARGET_PER_SECOND = 20_000
TARGET_RATIO = 1.2
"""The copy's whole command within this factor of the bare load of the same rows."""
MESSAGES_PER_SESSION = 20
LONG_SESSION = 500


def spec_for(messages: int, seed: int) -> DatasetSpec:
    """Sessions of 20 messages plus one of 500, ``messages`` in all (rounded down to 20)."""
    return DatasetSpec(
        (messages - LONG_SESSION) // MESSAGES_PER_SESSION + 1, MESSAGES_PER_SESSION, LONG_SESSION, seed
    )


def ensure_store(spec: DatasetSpec, cache: Path, log: Callable[[str], None]) -> Path:
    """The SQLite store of ``spec`` under ``cache``, built (source first) if missing."""
    cache.mkdir(parents=True, exist_ok=True)
    source = cache / f"source-{spec.key}.db"
    store = cache / f"store-{spec.key}.db"
    if not source.exists():
        log(f"generating {spec.message_total:,} messages -> {source}")
        started = time.perf_counter()
        build_source(spec, source)
        log(f"  {time.perf_counter() - started:.0f} s")
    if not store.exists():
        log(f"loading them into a hermes_store SQLite file -> {store}")
        log(f"  {build_side('store', str(source), str(store)):.0f} s")
    return store


@contextmanager
def scratch_database(admin_url: str) -> Iterator[str]:
    """A new, empty PostgreSQL database (dropped afterwards); yields its URL."""
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    name = f"hermes_bench_copy_{uuid.uuid4().hex[:8]}"
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield sa.make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def _psycopg_url(url: str) -> str:
    """The libpq form of a SQLAlchemy URL (psycopg connects with it directly)."""
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _set_aside(reference: Any) -> list[Any]:
    """What the bare load drops before its COPY: every non-unique index and foreign key."""
    return [
        item
        for item in reference.ordered()
        if (item.kind == "index" and not item.unique)
        or (item.kind == "constraint" and item.definition.startswith("FOREIGN KEY"))
    ]


def _copy_table(connection: Any, store: Path, table: str, names: list[str], content_at: int | None) -> int:
    """Every row of ``table`` from the SQLite file in one ``COPY`` (one transaction)."""
    from hermes_store.db.backends.postgresql import content_to_storage

    columns = ", ".join(f'"{name}"' for name in names)
    source = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    count = 0
    try:
        rows = source.execute(f"SELECT {columns} FROM {table} ORDER BY rowid")
        with connection.cursor() as cursor, cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for row in rows:
                if content_at is not None:
                    row = (*row[:content_at], content_to_storage(row[content_at]), *row[content_at + 1 :])
                copy.write_row(row)
                count += 1
        connection.commit()
    finally:
        source.close()
    return count


def _build(conninfo: str, statement: str) -> float:
    """One ``CREATE INDEX`` (or constraint) on its own connection; its seconds."""
    import psycopg

    from hermes_store.admin.copy_target import INDEX_BUILD_MEMORY

    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(f"SET maintenance_work_mem = '{INDEX_BUILD_MEMORY}'")
        started = time.perf_counter()
        connection.execute(statement)
        return time.perf_counter() - started


_SIZES = """
    SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c
    WHERE c.oid = 'messages'::regclass
       OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'messages'::regclass)
    UNION ALL
    SELECT 'TOAST', pg_relation_size(t.reltoastrelid) + COALESCE(
        (SELECT sum(pg_relation_size(indexrelid)) FROM pg_index WHERE indrelid = t.reltoastrelid), 0)
    FROM pg_class t WHERE t.oid = 'messages'::regclass
"""


def bare_load(store: Path, url: str) -> dict[str, Any]:
    """The floor: schema, one ``COPY`` per table with no secondary index, then the builds."""
    import psycopg

    from hermes_store.admin.copy_schema import reference_schema
    from hermes_store.admin.copy_source import columns_of
    from hermes_store.admin.copy_target import INDEX_BUILDERS, build_order
    from hermes_store.db.engine import create_engine
    from hermes_store.schema.migrate import upgrade
    from hermes_store.schema.models import Message, Session

    load_before, started = os.getloadavg(), time.perf_counter()
    engine = create_engine(url)
    try:
        upgrade(engine)
        set_aside = _set_aside(reference_schema(engine))
    finally:
        engine.dispose()
    conninfo = _psycopg_url(url)
    with psycopg.connect(conninfo) as connection:
        for item in reversed(set_aside):  # foreign keys first
            what = "INDEX" if item.kind == "index" else "CONSTRAINT"
            table = "" if item.kind == "index" else f"ALTER TABLE {item.table} "
            connection.execute(f"{table}DROP {what} {item.name}")
        connection.commit()
        schema_at = time.perf_counter()
        _copy_table(connection, store, "sessions", columns_of(Session), None)
        names = columns_of(Message)
        messages = _copy_table(connection, store, "messages", names, names.index("content"))
    copied_at = time.perf_counter()
    indexes = build_order([item for item in set_aside if item.kind == "index"])
    with ThreadPoolExecutor(max_workers=INDEX_BUILDERS) as pool:
        seconds = list(pool.map(lambda item: _build(conninfo, item.create), indexes))
    built = {item.name: spent for item, spent in zip(indexes, seconds, strict=True)}
    indexed_at = time.perf_counter()
    for item in set_aside:
        if item.kind == "constraint":
            built[item.name] = _build(conninfo, item.create)
    finished = time.perf_counter()
    with psycopg.connect(conninfo) as connection:
        sizes = {str(name): int(size) for name, size in connection.execute(_SIZES)}
        # Not timed: what makes the loaded database a working store for --index-costs.
        connection.execute("SELECT setval(pg_get_serial_sequence('messages', 'id'), max(id)) FROM messages")
        connection.commit()
        connection.autocommit = True
        connection.execute("ANALYZE sessions, messages")
    return {
        "messages": messages,
        "seconds": finished - started,
        "schema_seconds": schema_at - started,
        "copy_seconds": copied_at - schema_at,
        "index_seconds": indexed_at - copied_at,
        "constraint_seconds": finished - indexed_at,
        "builds": built,
        "sizes": sizes,
        "load_before": load_before,
        "load_after": os.getloadavg(),
    }


def time_phases(store: Path, url: str) -> dict[str, Any]:
    """The copy in-process: when each of its steps began and ended, from the start."""
    from hermes_store.admin.transfer import copy_store
    from hermes_store.db.engine import create_engine

    marks: dict[str, list[float]] = {}
    load_before, started = os.getloadavg(), time.perf_counter()

    def progress(step: str, done: int, total: int | None) -> None:
        now = time.perf_counter() - started
        marks.setdefault(step, [now, now])[1] = now

    source, target = create_engine(store, prepare=False), create_engine(url)
    try:
        copy_store(source, target, progress)
    finally:
        source.dispose()
        target.dispose()
    return {
        "seconds": time.perf_counter() - started,
        "steps": marks,
        "load_before": load_before,
        "load_after": os.getloadavg(),
    }


def time_command(store: Path, url: str) -> dict[str, Any]:
    """Run ``hermes-store copy STORE URL --json`` in a child process; the whole run timed."""
    load_before = os.getloadavg()
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "hermes_store.cli", "copy", str(store), url, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"hermes-store copy failed: {result.stderr.strip()}")
    summary = json.loads(result.stdout)
    return {
        "messages": summary["messages"],
        "sessions": summary["sessions"],
        "seconds": seconds,
        "messages_per_second": summary["messages"] / seconds,
        "inside_command_seconds": summary["seconds"],
        "load_before": load_before,
        "load_after": os.getloadavg(),
    }


class _Enough(Exception):
    """Stops an in-process copy once the sample of messages is in."""


def time_messages_step(store: Path, url: str, binary: bool, sample: int) -> float:
    """Messages per second of the messages step alone (text or binary COPY), first ``sample``."""
    from hermes_store.admin import copy_target
    from hermes_store.admin.transfer import copy_store
    from hermes_store.db.engine import create_engine

    copy_target.PostgresCopyWriter.binary = binary
    marks: dict[str, float] = {}

    def progress(step: str, done: int, total: int | None) -> None:
        if step == "messages":
            marks.setdefault("start", time.perf_counter())
            if done >= sample:
                marks["done"] = float(done)
                marks["end"] = time.perf_counter()
                raise _Enough

    source, target = create_engine(store, prepare=False), create_engine(url)
    try:
        copy_store(source, target, progress)
    except _Enough:
        pass
    finally:
        source.dispose()
        target.dispose()
        copy_target.PostgresCopyWriter.binary = False
    return marks["done"] / (marks["end"] - marks["start"])


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) the store, time the copy, print the figures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("HERMES_TEST_PG_URL"),
        help="a URL of a PostgreSQL server to create scratch databases on (default: $HERMES_TEST_PG_URL)",
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--cache", type=Path, default=Path("bench-results"))
    parser.add_argument("--compare-formats", type=int, metavar="N", default=0)
    parser.add_argument("--rounds", type=int, default=1, help="whole-command runs, each beside a bare load")
    parser.add_argument("--phases", action="store_true", help="also time the copy's steps in-process")
    parser.add_argument(
        "--bare-first", action="store_true", help="the bare load before the copy in each round (load drifts)"
    )
    parser.add_argument(
        "--index-costs",
        type=int,
        metavar="N",
        default=0,
        help="on the bare-loaded database: each message index's append cost (N messages) and readers",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if not args.pg_url:
        parser.error("give --pg-url (or set HERMES_TEST_PG_URL)")

    def log(line: str) -> None:
        print(line, flush=True)

    store = ensure_store(spec_for(args.messages, args.seed), args.cache, log)
    report: dict[str, Any] = {"store": str(store), "formats": [], "runs": [], "bare": [], "phases": []}
    if args.compare_formats:
        for binary in (False, True, False, True):
            with scratch_database(args.pg_url) as url:
                rate = time_messages_step(store, url, binary, args.compare_formats)
            entry: dict[str, Any] = {
                "format": "binary" if binary else "text",
                "messages_per_second": rate,
                "load": os.getloadavg(),
            }
            report["formats"].append(entry)
            log(
                f"messages step, {entry['format']:6} COPY: {rate:,.0f} messages/s "
                f"(load {_load(entry['load'])})"
            )
    for _ in range(args.rounds):
        if args.bare_first:
            with scratch_database(args.pg_url) as url:
                bare = bare_load(store, url)
        with scratch_database(args.pg_url) as url:
            run = time_command(store, url)
        report["runs"].append(run)
        _print_command(run, log)
        with scratch_database(args.pg_url) as url:
            if not args.bare_first:
                bare = bare_load(store, url)
            _print_bare(bare, run, log)
            if args.index_costs and not args.bare_first:
                bare["index_costs"] = _index_costs(url, args.index_costs, log)
        report["bare"].append(bare)
        if args.phases:
            with scratch_database(args.pg_url) as url:
                phases = time_phases(store, url)
            report["phases"].append(phases)
            _print_phases(phases, log)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


def _print_command(run: dict[str, Any], log: Callable[[str], None]) -> None:
    verdict = "met" if run["messages_per_second"] >= TARGET_PER_SECOND else "MISSED"
    log(
        f"hermes-store copy: {run['messages']:,} messages in {run['seconds']:.1f} s = "
        f"{run['messages_per_second']:,.0f} messages/s (target {TARGET_PER_SECOND:,}: {verdict}); "
        f"load before {_load(run['load_before'])}, after {_load(run['load_after'])}; "
        f"{_utc()}"
    )


def _print_bare(bare: dict[str, Any], run: dict[str, Any], log: Callable[[str], None]) -> None:
    ratio = run["seconds"] / bare["seconds"]
    verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
    log(
        f"bare load: {bare['seconds']:.1f} s (schema {bare['schema_seconds']:.1f}, COPY "
        f"{bare['copy_seconds']:.1f}, indexes {bare['index_seconds']:.1f}, foreign keys "
        f"{bare['constraint_seconds']:.1f}); load before {_load(bare['load_before'])}, after "
        f"{_load(bare['load_after'])}; {_utc()}"
    )
    log(
        f"copy / bare = {run['seconds']:.1f} / {bare['seconds']:.1f} = {ratio:.2f} "
        f"(target {TARGET_RATIO}: {verdict})"
    )
    per_message = 1e6 / bare["messages"]
    for name, seconds in sorted(bare["builds"].items(), key=lambda item: -item[1]):
        log(f"  build {name:40} {seconds:7.2f} s  {seconds * per_message:7.1f} µs/message")
    for name, size in sorted(bare["sizes"].items(), key=lambda item: -item[1]):
        log(f"  size  {name:40} {size / 2**20:7.1f} MiB {size / bare['messages']:7.0f} B/message")


def _print_phases(phases: dict[str, Any], log: Callable[[str], None]) -> None:
    steps = " ".join(f"{step} {low:.1f}-{high:.1f}" for step, (low, high) in phases["steps"].items())
    log(
        f"copy in-process: {phases['seconds']:.1f} s; steps (s from start): {steps}; "
        f"load before {_load(phases['load_before'])}, after {_load(phases['load_after'])}"
    )


def _index_costs(url: str, count: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Each message index's append cost and the public calls whose plans read it."""
    from benchmarks.message_indexes import append_costs, index_readers, standard_calls

    load_before = os.getloadavg()
    costs = append_costs(_psycopg_url(url), count)
    log(
        f"appending {count:,} messages: {costs['us_per_message_every_index']:.0f} µs/message with every "
        f"index, {costs['us_per_message_no_secondary_index']:.0f} without secondary indexes (load before "
        f"{_load(load_before)}, after {_load(os.getloadavg())}); WAL per message by relation:"
    )
    for name, cost in sorted(costs["relations"].items(), key=lambda item: -item[1]["wal_bytes_per_message"]):
        log(
            f"  {name:40} {cost['wal_bytes_per_message']:7.0f} B of records "
            f"(+{cost['fpi_bytes_per_message']:6.0f} B of page images)"
        )
    readers = index_readers(url, standard_calls(url))
    for call, indexes in readers.items():
        log(f"  {call:40} reads {', '.join(indexes) or '(no message index)'}")
    return {"append": costs, "readers": readers, "load_before": load_before, "load_after": os.getloadavg()}


def _utc() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


def _load(averages: tuple[float, float, float]) -> str:
    return " / ".join(f"{value:.1f}" for value in averages)


if __name__ == "__main__":
    raise SystemExit(main())
