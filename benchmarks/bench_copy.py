"""``hermes-store copy`` of a SQLite store into PostgreSQL, timed as the whole command.

    python -m benchmarks.bench_copy --messages 200000 --pg-url postgresql+psycopg://postgres@127.0.0.1/postgres

1. The seeded workload (:mod:`benchmarks.workload`, the same rows as the other
   benchmarks: Zipf prose, ~10 % CJK, ~30 % tool traffic, lineage) of ``--messages``
   messages — sessions of 20 plus one of 500 — is generated once into a source file and
   bulk-loaded into a hermes_store SQLite file (:mod:`benchmarks.datasets`; its FTS5
   triggers index the rows). Both are cached under ``--cache`` and reused.
2. A fresh PostgreSQL database is created, and ``hermes-store copy STORE URL --json`` is
   run in a child process and timed from start to exit: start-up, schema creation,
   COPY of every row, index builds, verification.
3. ``--compare-formats N`` first times the messages step alone for text and binary COPY
   (the first N messages, in-process, alternating, each into its own fresh database).

Prints messages per second against the 20,000 target with the load averages before and
after (the machine may be shared); ``--json`` also writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from benchmarks.datasets import DatasetSpec, build_side, build_source

TARGET_PER_SECOND = 20_000
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
    parser.add_argument("--rounds", type=int, default=1, help="whole-command runs")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if not args.pg_url:
        parser.error("give --pg-url (or set HERMES_TEST_PG_URL)")

    def log(line: str) -> None:
        print(line, flush=True)

    store = ensure_store(spec_for(args.messages, args.seed), args.cache, log)
    report: dict[str, Any] = {"store": str(store), "formats": [], "runs": []}
    if args.compare_formats:
        for binary in (False, True, False, True):
            with scratch_database(args.pg_url) as url:
                rate = time_messages_step(store, url, binary, args.compare_formats)
            entry = {
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
        with scratch_database(args.pg_url) as url:
            run = time_command(store, url)
        report["runs"].append(run)
        verdict = "met" if run["messages_per_second"] >= TARGET_PER_SECOND else "MISSED"
        log(
            f"hermes-store copy: {run['messages']:,} messages in {run['seconds']:.1f} s = "
            f"{run['messages_per_second']:,.0f} messages/s (target {TARGET_PER_SECOND:,}: {verdict}); "
            f"load before {_load(run['load_before'])}, after {_load(run['load_after'])}"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


def _load(averages: tuple[float, float, float]) -> str:
    return " / ".join(f"{value:.1f}" for value in averages)


if __name__ == "__main__":
    raise SystemExit(main())
