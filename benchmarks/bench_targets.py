"""Write targets: upstream Hermes, raw sqlite3 and hermes_store, interleaved in one run.

``python -m benchmarks.bench_targets [--rounds 3] [--appends 1200] [--dir /dev/shm]`` runs,
every round, each side on a fresh file in rotating order (so a load spike on the shared
machine hits every side alike), then reports medians over rounds and the ratios the targets
name (``--dir /dev/shm``: the same without the disk's fsync, each side's CPU alone):

* **1 thread**: one store, one thread, ``--appends`` appends (a realistic mix: two in five
  assistant messages carry 1–2 tool calls, 200–800 characters of text);
* **8 threads on one store**: 8 threads, 8 sessions, the same total;
* **200 tasks on one AsyncSessionDB** (hermes_store only), the same total, against
  upstream's 8-thread figure of the same round;
* **4 and 8 processes on one file**, each opening its own store, the same total;
* **append_messages**: turns of 4 messages, one ``append_messages`` call each against 4
  ``append_message`` calls (hermes_store) and against upstream's 4 calls;
* **ceilings** (raw sqlite3 only): upstream's appends from one thread, 8 (round-robin over
  8 sessions) or 4 to a transaction — the most a group commit of that size could reach at
  no cost of its own, put beside upstream's 8 threads and raw sqlite3's one-by-one turns.

Upstream is Hermes' own ``hermes_state.py`` extracted from the mirror at run time
(:mod:`benchmarks.upstream`); "sqlite3" is :mod:`benchmarks.baseline_sqlite`, plain sqlite3
doing upstream's work. After every run each acknowledged id is looked up with sqlite3: a
missing one is *lost*, a row not acknowledged or stored twice is *duplicated*, and every
session's ``message_count``/``tool_call_count`` must equal its rows. ``uptime``'s load
averages are printed at the start and end: the machine these figures come from is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import queue
import random
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from benchmarks.upstream import upstream_folder, upstream_session_db

Message = dict[str, Any]
Store = Any


def load_average() -> str:
    """``uptime``'s three load averages."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def messages_for(seed: int, count: int) -> list[Message]:
    """``count`` append_message keyword sets: the realistic mix of the module docstring."""
    rng = random.Random(seed)
    words = ["docker", "build", "cache", "layer", "python", "error", "fix", "retry", "lisbon", "tool"]
    out: list[Message] = []
    for n in range(count):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(30, 120)))
        if n % 5 in (1, 3):
            calls = [
                {"id": f"c{n}-{k}", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}
                for k in range(rng.randint(1, 2))
            ]
            out.append({"role": "assistant", "content": text, "tool_calls": calls})
        else:
            out.append({"role": rng.choice(["user", "tool"]), "content": text})
    return out


def open_store(side: str, path: Path, upstream: Path | None) -> Store:
    """A store of ``side`` on ``path``: ``upstream``, ``sqlite3`` or ``hermes_store``."""
    if side == "upstream":
        assert upstream is not None
        return upstream_session_db(upstream)(db_path=path)
    if side == "sqlite3":
        from benchmarks.baseline_sqlite import BaselineStore

        return BaselineStore(path)
    from hermes_store import SessionDB

    return SessionDB(path)


Acks = list[tuple[str, int]]


def _append_all(db: Store, session: str, batch: list[Message], acks: Acks) -> None:
    for message in batch:
        acks.append((session, db.append_message(session, **message)))


def run_threads(side: str, path: Path, upstream: Path | None, threads: int, total: int) -> tuple[float, Acks]:
    """``threads`` threads on one store, ``total`` appends in all; (seconds, acknowledged)."""
    db = open_store(side, path, upstream)
    sessions = [f"t{n}" for n in range(threads)]
    for session in sessions:
        db.create_session(session, "bench")
    per = total // threads
    acks: Acks = []
    workers = [
        threading.Thread(target=_append_all, args=(db, s, messages_for(n, per), acks))
        for n, s in enumerate(sessions)
    ]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - start
    db.close()
    return elapsed, acks


def run_tasks(path: Path, tasks: int, total: int) -> tuple[float, Acks]:
    """``tasks`` asyncio tasks on one ``AsyncSessionDB``, ``total`` appends in all."""
    from hermes_store.aio import AsyncSessionDB

    async def scenario() -> tuple[float, Acks]:
        acks: Acks = []
        async with AsyncSessionDB(path) as db:
            sessions = [f"a{n}" for n in range(tasks)]
            for session in sessions:
                await db.create_session(session, "bench")
            per = max(total // tasks, 1)

            async def task(n: int, session: str) -> None:
                for message in messages_for(n, per):
                    acks.append((session, await db.append_message(session, **message)))

            start = time.perf_counter()
            await asyncio.gather(*(task(n, s) for n, s in enumerate(sessions)))
            return time.perf_counter() - start, acks

    return asyncio.run(scenario())


def _process_writer(
    side: str, path: str, upstream: str | None, session: str, per: int, seed: int, barrier: Any, out: Any
) -> None:
    db = open_store(side, Path(path), Path(upstream) if upstream else None)
    acks: Acks = []
    barrier.wait(timeout=120)
    start = time.perf_counter()
    _append_all(db, session, messages_for(seed, per), acks)
    out.put((start, time.perf_counter(), acks))
    db.close()


def run_processes(
    side: str, path: Path, upstream: Path | None, processes: int, total: int
) -> tuple[float, Acks]:
    """``processes`` processes on one file, each with its own store; span from first start to last end."""
    db = open_store(side, path, upstream)
    sessions = [f"p{n}" for n in range(processes)]
    for session in sessions:
        db.create_session(session, "bench")
    db.close()
    context = multiprocessing.get_context("fork")
    barrier, out = context.Barrier(processes), context.Queue()
    children = [
        context.Process(
            target=_process_writer,
            args=(
                side,
                str(path),
                str(upstream) if upstream else None,
                s,
                total // processes,
                n,
                barrier,
                out,
            ),
        )
        for n, s in enumerate(sessions)
    ]
    for child in children:
        child.start()
    results = _collect(out, children, deadline=time.monotonic() + 600)
    for child in children:
        child.join()
    acks = [ack for _s, _e, child_acks in results for ack in child_acks]
    return max(e for _s, e, _a in results) - min(s for s, _e, _a in results), acks


def _collect(out: Any, children: list[Any], deadline: float) -> list[Any]:
    """Every child's report, failing at once (not at ``deadline``) when one ends without it."""
    results: list[Any] = []
    while len(results) < len(children):
        try:
            results.append(out.get(timeout=1))
        except queue.Empty:
            failed = [child.exitcode for child in children if child.exitcode not in (None, 0)]
            if failed:
                raise RuntimeError(f"a writer process failed (exit codes {failed})") from None
            if time.monotonic() > deadline:
                raise TimeoutError("the writer processes did not all report in time") from None
    return results


def run_turns(side: str, path: Path, upstream: Path | None, turns: int, batched: bool) -> tuple[float, Acks]:
    """``turns`` turns of 4 messages, by ``append_messages`` (``batched``) or one call each."""
    db = open_store(side, path, upstream)
    db.create_session("turns", "bench")
    turn_messages = messages_for(7, 4 * turns)
    acks: Acks = []
    start = time.perf_counter()
    for n in range(turns):
        turn = turn_messages[4 * n : 4 * n + 4]
        if batched:
            acks += [("turns", i) for i in db.append_messages("turns", turn)]
        else:
            _append_all(db, "turns", turn, acks)
    elapsed = time.perf_counter() - start
    db.close()
    return elapsed, acks


def run_ceiling(path: Path, sessions: int, per_commit: int, total: int) -> tuple[float, Acks]:
    """Raw sqlite3 doing upstream's appends from one thread, ``per_commit`` in each
    transaction, round-robin over ``sessions``: what a perfect group commit of that size
    could reach with no cost of its own."""
    from benchmarks.baseline_sqlite import BaselineStore

    db = BaselineStore(path)
    names = [f"c{n}" for n in range(sessions)]
    for name in names:
        db.create_session(name, "bench")
    per = total // sessions
    batches = [messages_for(n, per) for n in range(sessions)]
    calls = [(names[n], batches[n][k]) for k in range(per) for n in range(sessions)]
    acks: Acks = []
    start = time.perf_counter()
    for at in range(0, len(calls), per_commit):
        group = calls[at : at + per_commit]
        acks += [(s, i) for (s, _m), i in zip(group, db.append_in_one_transaction(group), strict=True)]
    elapsed = time.perf_counter() - start
    db.close()
    return elapsed, acks


def verify(path: Path, acks: Acks) -> tuple[int, int, int]:
    """(lost, duplicated, sessions whose counters differ from their rows), read with sqlite3."""
    with closing(sqlite3.connect(path)) as check:
        stored = dict(check.execute("SELECT id, session_id FROM messages").fetchall())
        lost = sum(1 for session, message_id in acks if stored.get(message_id) != session)
        duplicated = len(stored) - len({message_id for _s, message_id in acks} & stored.keys())
        duplicated += len(acks) - len({message_id for _s, message_id in acks})
        wrong = check.execute(
            "SELECT COUNT(*) FROM sessions s WHERE s.message_count != "
            "(SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id) OR s.tool_call_count != "
            "(SELECT COALESCE(SUM(json_array_length(m.tool_calls)), 0) FROM messages m "
            "WHERE m.session_id = s.id)"
        ).fetchone()[0]
    return lost, duplicated, int(wrong)


class Figures:
    """Throughputs per (workload, side) over rounds, and the correctness tallies."""

    def __init__(self) -> None:
        self.rates: dict[tuple[str, str], list[float]] = {}
        self.lost = self.duplicated = self.wrong_counters = 0

    def add(self, workload: str, side: str, path: Path, outcome: tuple[float, Acks]) -> None:
        elapsed, acks = outcome
        self.rates.setdefault((workload, side), []).append(len(acks) / elapsed)
        lost, duplicated, wrong = verify(path, acks)
        self.lost += lost
        self.duplicated += duplicated
        self.wrong_counters += wrong

    def median(self, workload: str, side: str) -> float | None:
        rates = self.rates.get((workload, side))
        return statistics.median(rates) if rates else None


def one_round(figures: Figures, work: Path, upstream: Path | None, appends: int, order: list[str]) -> None:
    """Every workload once for every side, the sides in ``order``, each on a new file in ``work``."""
    fresh = iter(range(10**6))

    def file() -> Path:
        return work / f"run{next(fresh)}.db"

    def each(workload: str, run: Callable[[str, Path], tuple[float, Acks]], sides: list[str]) -> None:
        for side in [s for s in order if s in sides]:
            path = file()
            figures.add(workload, side, path, run(side, path))

    all_sides = order
    each("1 thread", lambda side, p: run_threads(side, p, upstream, 1, appends), all_sides)
    each("8 threads, one store", lambda side, p: run_threads(side, p, upstream, 8, appends), all_sides)
    each("200 tasks, one AsyncSessionDB", lambda side, p: run_tasks(p, 200, appends), ["hermes_store"])
    for processes in (4, 8):
        each(
            f"{processes} processes, one file",
            lambda side, p, n=processes: run_processes(side, p, upstream, n, appends),
            all_sides,
        )
    for sessions, per_commit in ((8, 8), (1, 4)):
        each(
            f"ceiling: {per_commit} per commit",
            lambda side, p, s=sessions, c=per_commit: run_ceiling(p, s, c, appends),
            ["sqlite3"],
        )
    turns = max(appends // 16, 10)
    each("turns of 4, one call each", lambda side, p: run_turns(side, p, upstream, turns, False), all_sides)
    each(
        "turns of 4, append_messages",
        lambda side, p: run_turns(side, p, upstream, turns, True),
        ["hermes_store"],
    )


def report(figures: Figures, has_upstream: bool) -> list[str]:
    """The figures as a markdown table, with the targets' ratios."""
    lines = [
        "| workload | upstream | sqlite3 | hermes_store | ratio | target |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]

    def rate(value: float | None) -> str:
        return "—" if value is None else f"{value:,.0f}"

    def ratio_row(workload: str, against: tuple[str, str], target: str) -> None:
        ours = figures.median(workload, "hermes_store")
        base = figures.median(*against)
        ratio = "—" if ours is None or base is None else f"{ours / base:.2f}×"
        lines.append(
            f"| {workload} | {rate(figures.median(workload, 'upstream'))} | "
            f"{rate(figures.median(workload, 'sqlite3'))} | {rate(ours)} | {ratio} | {target} |"
        )

    up = "upstream" if has_upstream else "sqlite3"
    ratio_row("1 thread", ("1 thread", up), "≥ 0.97× upstream")
    ratio_row("8 threads, one store", ("8 threads, one store", up), "≥ 3× upstream")
    ratio_row("200 tasks, one AsyncSessionDB", ("8 threads, one store", up), "≥ 3× upstream's 8 threads")
    ratio_row("4 processes, one file", ("4 processes, one file", up), "≥ 0.95× upstream")
    ratio_row("8 processes, one file", ("8 processes, one file", up), "≥ 0.95× upstream")
    ratio_row("turns of 4, one call each", ("turns of 4, one call each", up), "—")
    ratio_row(
        "turns of 4, append_messages", ("turns of 4, one call each", "hermes_store"), "≥ 3× one call each"
    )
    # What no group commit can beat: raw sqlite3, one thread, no cost of its own.
    for workload, against in (
        ("ceiling: 8 per commit", ("8 threads, one store", up)),
        ("ceiling: 4 per commit", ("turns of 4, one call each", "sqlite3")),
    ):
        ceiling, base = figures.median(workload, "sqlite3"), figures.median(*against)
        ratio = "—" if ceiling is None or base is None else f"{ceiling / base:.2f}×"
        lines.append(
            f"| {workload} (raw sqlite3) | — | {rate(ceiling)} | — | {ratio} "
            f"| ratio against {against[1]}'s {against[0]} |"
        )
    lines.append("")
    lines.append(
        f"messages/s, medians over rounds. lost: {figures.lost}, duplicated: {figures.duplicated}, "
        f"sessions with wrong counters: {figures.wrong_counters}."
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the rounds and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--appends", type=int, default=1200, help="appends per workload and side")
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="where the files go (default: the system's temporary folder); /dev/shm takes the "
        "disk's fsync out and leaves each side's CPU",
    )
    args = parser.parse_args(argv)
    upstream = upstream_folder()
    sides = (["upstream"] if upstream else []) + ["sqlite3", "hermes_store"]
    print(f"load average at start: {load_average()}", flush=True)
    figures = Figures()
    print(f"files in: {args.dir or tempfile.gettempdir()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="hermes-targets-", dir=args.dir) as work:
        for n in range(args.rounds):
            order = sides[n % len(sides) :] + sides[: n % len(sides)]
            (Path(work) / f"round{n}").mkdir()
            one_round(figures, Path(work) / f"round{n}", upstream, args.appends, order)
            print(f"round {n + 1}/{args.rounds} done, load average {load_average()}", flush=True)
    print(f"load average at end: {load_average()}")
    print("\n".join(report(figures, upstream is not None)))
    return 0 if figures.lost == figures.duplicated == figures.wrong_counters == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
