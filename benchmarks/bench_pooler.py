"""Writer processes appending through PgBouncer in transaction mode, against direct connections.

``python -m benchmarks.bench_pooler --url postgresql+psycopg://postgres@127.0.0.1:5432/test``
creates a scratch database on that server, starts PgBouncer (:mod:`benchmarks.pgbouncer`,
``--pool-size`` server connections, 2 by default) in front of it, and for each writer count
(8 and 32 by default) runs that many processes, each opening its own store and appending
``--appends`` messages to a session of its own, once through the pooler and once directly,
alternating which goes first over ``--rounds`` rounds. Printed per side: appends per second
over the whole run (first start to last end), the median and p99 latency of one append,
the calls that failed, the messages missing afterwards (must be 0), and the load average
before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from benchmarks.pgbouncer import transaction_pooler
from benchmarks.timing import median, percentile

_WRITER = """
import json, sys, time
from hermes_store import SessionDB
url, name, count, start_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
db = SessionDB(url=url)
db.create_session(name, "bench")
while time.time() < start_at:
    time.sleep(0.001)
latencies, failures, began = [], 0, time.time()
for n in range(count):
    t0 = time.perf_counter()
    try:
        db.append_message(name, role="user", content=f"message {n} of {name}")
    except Exception:
        failures += 1
    latencies.append(time.perf_counter() - t0)
db.close()
print(json.dumps({"began": began, "ended": time.time(), "latencies": latencies, "failures": failures}))
"""


def _run(url: str, writers: int, appends: int, tag: str) -> dict[str, Any]:
    start_at = time.time() + 3.0  # every writer has opened its store by then
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(_WRITER), url, f"{tag}_{n}", str(appends), str(start_at)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(writers)
    ]
    results = [json.loads(process.communicate()[0].strip().splitlines()[-1]) for process in processes]
    began = min(result["began"] for result in results)
    ended = max(result["ended"] for result in results)
    latencies = [value for result in results for value in result["latencies"]]
    failures = sum(result["failures"] for result in results)
    return {
        "rate": (writers * appends - failures) / (ended - began),
        "p50_ms": median(latencies) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "failures": failures,
    }


def _missing(url: str, tag: str, writers: int, appends: int) -> int:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            stored = connection.execute(
                sa.text("SELECT COUNT(*) FROM messages WHERE starts_with(session_id, :prefix)"),
                {"prefix": f"{tag}_"},
            ).scalar()
    finally:
        engine.dispose()
    return writers * appends - int(stored or 0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="an admin URL of the PostgreSQL server")
    parser.add_argument("--writers", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--appends", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pool-size", type=int, default=2)
    args = parser.parse_args(argv)
    admin = sa.create_engine(args.url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    database = f"bench_pooler_{uuid.uuid4().hex[:8]}"
    with admin.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {database}")
    direct = sa.make_url(args.url).set(database=database).render_as_string(hide_password=False)
    try:
        from hermes_store import SessionDB

        SessionDB(url=direct).close()
        with (
            tempfile.TemporaryDirectory() as folder,
            transaction_pooler(direct, Path(folder), pool_size=args.pool_size) as pooled,
        ):
            print(f"load average before: {os.getloadavg()}")
            for writers in args.writers:
                figures: dict[str, list[dict[str, Any]]] = {"pooler": [], "direct": []}
                missing = {"pooler": 0, "direct": 0}
                for round_ in range(args.rounds):
                    order = ("pooler", "direct") if round_ % 2 == 0 else ("direct", "pooler")
                    for side in order:
                        tag = f"{side}{writers}r{round_}"
                        figures[side].append(
                            _run(pooled if side == "pooler" else direct, writers, args.appends, tag)
                        )
                        missing[side] += _missing(direct, tag, writers, args.appends)
                for side, runs in figures.items():
                    rate = median([r["rate"] for r in runs])
                    print(
                        f"{writers:>3} writers, {side:<6}: {rate:8.1f} appends/s, "
                        f"p50 {median([r['p50_ms'] for r in runs]):6.1f} ms, "
                        f"p99 {median([r['p99_ms'] for r in runs]):7.1f} ms, "
                        f"failed {sum(r['failures'] for r in runs)}, missing {missing[side]}"
                    )
            print(f"load average after: {os.getloadavg()}")
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        admin.dispose()


if __name__ == "__main__":
    main()
