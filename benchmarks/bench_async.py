"""``AsyncSessionDB`` against the sync ``SessionDB`` driven from a thread pool of the same size.

    python -m benchmarks.bench_async                       # SQLite
    python -m benchmarks.bench_async --pg-url postgresql+psycopg://postgres@127.0.0.1/test
    python -m benchmarks.bench_async --quick               # smoke run

For 1, 10 and 100 concurrent callers — asyncio tasks on one loop, or threads of a
``ThreadPoolExecutor`` sharing one sync store — it measures ``append_message``
throughput and ``search_messages`` p50/p99 (each call's latency, queueing included),
alternating the two sides round by round. It also prints the per-call overhead of the
async store over the sync store called directly (one caller, no pool), and the event
loop's largest stall while another process holds SQLite's write lock for 2 s and 20
tasks wait to write (for ``AsyncSessionDB``, and for the sync store called on the loop).
With ``--pg-url`` (an admin URL) the same runs on a PostgreSQL database created and
dropped by this script. Ratios are async / sync (throughput: above 1.00x is better).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import sqlalchemy as sa

from benchmarks.timing import median, percentile
from benchmarks.workload import generate_sessions, known_terms
from hermes_store import SessionDB
from hermes_store.aio import AsyncSessionDB

CONCURRENCY = (1, 10, 100)
_HOLD_LOCK = (
    "import sqlite3, sys, time\n"
    "c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)\n"
    "c.execute('BEGIN IMMEDIATE'); print('locked', flush=True)\n"
    "time.sleep(float(sys.argv[2])); c.execute('COMMIT')\n"
)


def _load(url: str, sessions: int, per_session: int, seed: int) -> None:
    with SessionDB(url) as db:
        for generated in generate_sessions(sessions, per_session, seed):
            db.create_session(generated.id, generated.source, model=generated.model)
            for message in generated.messages:
                db.append_message(
                    generated.id, message.role, content=message.content, tool_calls=message.tool_calls
                )
        for worker in range(max(CONCURRENCY)):
            db.create_session(f"bench-{worker}", "bench")


def _text(n: int) -> str:
    return f"benchmark append {n} " + "lorem ipsum dolor sit amet " * 20


def _pool_run(concurrency: int, calls: list[Callable[[], object]]) -> tuple[float, list[float]]:
    latencies: list[float] = []

    def timed(call: Callable[[], object]) -> None:
        started = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(timed, calls))
    return time.perf_counter() - started, latencies


async def _task_run(
    concurrency: int, calls: list[Callable[[], Awaitable[object]]]
) -> tuple[float, list[float]]:
    latencies: list[float] = []
    queue = iter(calls)

    async def worker() -> None:
        for call in queue:
            started = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started, latencies


class Sides:
    """The sync store and the async store (on its own loop) on one database."""

    def __init__(self, url: str) -> None:
        self.sync = SessionDB(url)
        self.loop = asyncio.new_event_loop()
        self.aio = self.loop.run_until_complete(AsyncSessionDB(url).open())
        self.counter = 0

    def close(self) -> None:
        self.loop.run_until_complete(self.aio.close())
        self.loop.close()
        self.sync.close()

    def appends(self, concurrency: int, total: int) -> dict[str, tuple[float, list[float]]]:
        def args(n: int) -> tuple[str, str, str]:
            self.counter += 1
            return (f"bench-{n % concurrency}", "user", _text(self.counter))

        arguments = [args(n) for n in range(total)]
        sync_calls = [partial(self.sync.append_message, *a) for a in arguments]
        arguments = [args(n) for n in range(total)]
        async_calls = [partial(self.aio.append_message, *a) for a in arguments]
        return {
            "sync": _pool_run(concurrency, sync_calls),
            "async": self.loop.run_until_complete(_task_run(concurrency, async_calls)),
        }

    def searches(self, concurrency: int, queries: list[str]) -> dict[str, tuple[float, list[float]]]:
        sync_calls = [partial(self.sync.search_messages, q) for q in queries]
        async_calls = [partial(self.aio.search_messages, q) for q in queries]
        return {
            "sync": _pool_run(concurrency, sync_calls),
            "async": self.loop.run_until_complete(_task_run(concurrency, async_calls)),
        }

    def single_call_latency(self, rounds: int, queries: list[str]) -> dict[str, dict[str, float]]:
        """Median latency of one call with no concurrency: sync called directly vs awaited.

        Both sides run inside one running loop, alternating call by call, so the async
        figure is the store's own cost (hops included), not the cost of starting a loop.
        """
        samples: dict[str, dict[str, list[float]]] = {
            "append": {"sync": [], "async": []},
            "search": {"sync": [], "async": []},
        }

        async def alternate() -> None:
            for n in range(rounds):
                query = queries[n % len(queries)]
                for side in ("sync", "async"):
                    self.counter += 1
                    text = _text(self.counter)
                    started = time.perf_counter()
                    if side == "sync":
                        self.sync.append_message("bench-0", "user", text)
                    else:
                        await self.aio.append_message("bench-0", "user", text)
                    samples["append"][side].append(time.perf_counter() - started)
                    started = time.perf_counter()
                    if side == "sync":
                        self.sync.search_messages(query)
                    else:
                        await self.aio.search_messages(query)
                    samples["search"][side].append(time.perf_counter() - started)

        self.loop.run_until_complete(alternate())
        return {call: {side: median(v) for side, v in sides.items()} for call, sides in samples.items()}


@contextmanager
def _lock_held(path: Path, seconds: float) -> Iterator[None]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(path), str(seconds)], stdout=subprocess.PIPE
    )
    assert holder.stdout is not None
    holder.stdout.readline()
    try:
        yield
    finally:
        holder.wait(timeout=60)
        holder.stdout.close()


async def _max_gap(work: Callable[[], Awaitable[object]]) -> float:
    """The largest extra delay a 10 ms ticker sees while ``work()`` runs (started after it)."""
    stop = asyncio.Event()
    gaps = [0.0]

    async def ticker() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last - 0.01)
            last = now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    await work()
    stop.set()
    await tick
    return max(gaps)


def loop_lag(path: Path) -> dict[str, float]:
    """Largest loop stall while another process holds the write lock 2 s and 20 tasks write."""
    figures: dict[str, float] = {}

    async def with_async() -> float:
        async with AsyncSessionDB(path) as db:
            with _lock_held(path, 2.0):
                return await _max_gap(
                    lambda: asyncio.gather(*(db.append_message("bench-0", "user", "x") for _ in range(20)))
                )

    async def with_sync_on_loop() -> float:
        with SessionDB(path) as db, _lock_held(path, 2.0):

            async def blocking() -> None:
                db.append_message("bench-0", "user", "x")

            return await _max_gap(lambda: asyncio.gather(*(blocking() for _ in range(20))))

    # As in tests/aio/test_aio_loop_lag.py: no collector pauses inside the window (a gen-2
    # collection of a large process stalls any loop, whatever the store does).
    gc.collect()
    gc.disable()
    try:
        figures["AsyncSessionDB"] = asyncio.run(with_async())
        figures["SessionDB called on the loop"] = asyncio.run(with_sync_on_loop())
    finally:
        gc.enable()
    return figures


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


class Rows(list[tuple[str, ...]]):
    """Table rows, each printed as soon as it is measured (a long run shows progress)."""

    def append(self, row: tuple[str, ...]) -> None:
        """Keep and print one row."""
        super().append(row)
        print("| " + " | ".join(row) + " |", flush=True)


def run_backend(name: str, url: str, path: Path | None, args: argparse.Namespace) -> list[tuple[str, ...]]:
    """Every figure for one backend, as table rows (figure, sync, async, ratio)."""
    _load(url, args.sessions, args.messages, args.seed)
    terms = list(known_terms(args.seed).as_dict().values())
    rows = Rows()
    sides = Sides(url)
    try:
        sides.appends(10, 50)  # warm both pools
        for concurrency in CONCURRENCY:
            throughput: dict[str, list[float]] = {"sync": [], "async": []}
            for _ in range(args.rounds):
                for side, (elapsed, _lat) in sides.appends(concurrency, args.appends).items():
                    throughput[side].append(args.appends / elapsed)
            sync_t, async_t = median(throughput["sync"]), median(throughput["async"])
            rows.append(
                (
                    f"{name}: appends/s, {concurrency} callers",
                    f"{sync_t:,.0f}",
                    f"{async_t:,.0f}",
                    f"{async_t / sync_t:.2f}x",
                )
            )
            queries = [terms[n % len(terms)] for n in range(args.searches)]
            latencies: dict[str, list[float]] = {"sync": [], "async": []}
            rates: dict[str, list[float]] = {"sync": [], "async": []}
            for _ in range(args.rounds):
                for side, (elapsed, lat) in sides.searches(concurrency, queries).items():
                    latencies[side].extend(lat)
                    rates[side].append(len(queries) / elapsed)
            sync_r, async_r = median(rates["sync"]), median(rates["async"])
            rows.append(
                (
                    f"{name}: searches/s, {concurrency} callers",
                    f"{sync_r:,.0f}",
                    f"{async_r:,.0f}",
                    f"{async_r / sync_r:.2f}x",
                )
            )
            for label, p in (("p50", 50.0), ("p99", 99.0)):
                s, a = percentile(latencies["sync"], p), percentile(latencies["async"], p)
                rows.append(
                    (f"{name}: search {label}, {concurrency} callers", _ms(s), _ms(a), f"{a / s:.2f}x")
                )
        single = sides.single_call_latency(args.single_rounds, terms)
        for call, figures in single.items():
            s, a = figures["sync"], figures["async"]
            rows.append(
                (f"{name}: one {call} call, no concurrency (overhead)", _ms(s), _ms(a), f"{a / s:.2f}x")
            )
    finally:
        sides.close()
    if path is not None:
        lag = loop_lag(path)
        rows.append(
            (
                f"{name}: max loop stall, lock held 2 s by another process, 20 writers",
                _ms(lag["SessionDB called on the loop"]),
                _ms(lag["AsyncSessionDB"]),
                "",
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the comparison on SQLite (and PostgreSQL with ``--pg-url``) and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg-url", help="an admin URL of a PostgreSQL server (database created and dropped)")
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    args.sessions, args.messages = (20, 10) if args.quick else (200, 20)
    args.appends, args.searches = (200, 100) if args.quick else (600, 200)
    args.rounds, args.single_rounds = (1, 20) if args.quick else (3, 200)

    load = os.getloadavg()
    print(
        f"AsyncSessionDB vs SessionDB in a thread pool (load average {load[0]:.2f}, {os.cpu_count()} cores)"
    )
    print("| figure | sync (thread pool) | async (tasks) | async / sync |")
    print("| --- | ---: | ---: | ---: |", flush=True)
    rows: list[tuple[str, ...]] = []
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "state.db"
        rows += run_backend("sqlite", str(path), path, args)
    if args.pg_url:
        admin = sa.create_engine(args.pg_url, isolation_level="AUTOCOMMIT")
        database = f"hermes_bench_async_{uuid.uuid4().hex[:8]}"
        with admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{database}"')
        try:
            url = sa.make_url(args.pg_url).set(database=database).render_as_string(hide_password=False)
            rows += run_backend("postgresql", url, None, args)
        finally:
            with admin.connect() as connection:
                connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            admin.dispose()

    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
