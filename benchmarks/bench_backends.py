"""hermes_store on PostgreSQL beside hermes_store on SQLite, on the same workload.

    python -m benchmarks.bench_backends --pg-url postgresql+psycopg://postgres@127.0.0.1/test

Loads the same seeded sessions through ``SessionDB.append_message`` into a fresh SQLite
file and a fresh PostgreSQL database (created and dropped by this script), then times
appends and every search kind on both. Prints medians and the ratio PostgreSQL / SQLite.
This is not a race between engines — a local SQLite file has no network hop — but the
figure a team moving to PostgreSQL should expect from the same code.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa

from benchmarks.timing import median, percentile
from benchmarks.workload import generate_sessions, known_terms
from hermes_store import SessionDB


def _load(db: SessionDB, sessions: int, per_session: int, seed: int) -> list[float]:
    latencies: list[float] = []
    for generated in generate_sessions(sessions, per_session, seed):
        db.create_session(generated.id, generated.source, model=generated.model)
        for message in generated.messages:
            started = time.perf_counter()
            db.append_message(
                generated.id,
                message.role,
                content=message.content,
                tool_calls=message.tool_calls,
                tool_call_id=message.tool_call_id,
                tool_name=message.tool_name,
                token_count=message.token_count,
            )
            latencies.append(time.perf_counter() - started)
    return latencies


def _time(fn: Callable[[], object], rounds: int) -> float:
    fn()
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return median(samples)


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg-url", required=True, help="an admin URL of a PostgreSQL server")
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--messages", type=int, default=50, help="messages per session")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)

    admin = sa.create_engine(args.pg_url, isolation_level="AUTOCOMMIT")
    name = f"hermes_bench_{uuid.uuid4().hex[:8]}"
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        with tempfile.TemporaryDirectory() as directory:
            stores = {
                "sqlite": SessionDB(Path(directory) / "state.db"),
                "postgresql": SessionDB(
                    url=sa.make_url(args.pg_url).set(database=name).render_as_string(False)
                ),
            }
            rows: dict[str, dict[str, float]] = {}
            for backend, db in stores.items():
                latencies = _load(db, args.sessions, args.messages, args.seed)
                figures = {
                    "append p50 (ms)": median(latencies) * 1e3,
                    "append p99 (ms)": percentile(latencies, 99) * 1e3,
                }
                for kind, query in known_terms(args.seed).as_dict().items():
                    figures[f"search {kind} (ms)"] = (
                        _time(lambda q=query, d=db: d.search_messages(q), args.rounds) * 1e3
                    )
                figures["list_sessions_rich (ms)"] = _time(db.list_sessions_rich, args.rounds) * 1e3
                rows[backend] = figures
                db.close()
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()

    total = args.sessions * args.messages
    print(f"{args.sessions} sessions x {args.messages} messages = {total:,} messages, seed {args.seed}")
    print(f"{'figure':<30} {'sqlite':>10} {'postgresql':>12} {'pg/sqlite':>10}")
    for figure, value in rows["sqlite"].items():
        other = rows["postgresql"][figure]
        print(f"{figure:<30} {value:>10.2f} {other:>12.2f} {other / value:>9.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
