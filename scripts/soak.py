#!/usr/bin/env python3
"""Soak test: the reliability scenarios of ``tests/reliability`` run for minutes, not seconds.

    python scripts/soak.py --minutes 5 [--json figures.json] [--keep] [--seed N]

Cycles until the time is up, each cycle running, on fresh files:

1. contention — 8 writer processes and 2 readers (search, listing, exports) on one
   ``state.db`` for a fixed number of operations, with a third process holding one read
   transaction throughout; then every guarantee is verified;
2. kill loop — writers killed with SIGKILL at random points, the database verified after
   every kill (integrity_check, FTS5 integrity-check, acknowledged messages present
   exactly once, nothing half-written, counters equal rows);
3. upgrade kills — opening a large legacy database killed part-way, then completed.

Prints the figures (operations, throughput, p50/p99 write latency, retries, kills,
verifications, data lost) and exits non-zero on the first broken guarantee, keeping the
files of the failing run. The machinery is ``tests/reliability/_harness.py``, the same
code the CI tests run.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "reliability"))

import _harness  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=5.0, help="how long to run (default 5)")
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--ops-per-writer", type=int, default=500, help="operations per writer per round")
    parser.add_argument("--kill-seconds", type=float, default=60.0, help="length of one kill-loop slice")
    parser.add_argument("--upgrade-kills", type=int, default=5, help="upgrade kills per cycle")
    parser.add_argument("--legacy-sessions", type=int, default=1000)
    parser.add_argument("--legacy-messages", type=int, default=40, help="messages per legacy session")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--workdir", type=Path, help="where to put the databases (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the databases afterwards")
    return parser.parse_args(argv)


class Totals:
    def __init__(self) -> None:
        self.contention_rounds = 0
        self.operations = 0
        self.appends = 0
        self.contention_seconds = 0.0
        self.latencies: list[float] = []
        self.retries = 0
        self.writer_errors: list[str] = []
        self.reader_operations = 0
        self.reader_errors: list[str] = []
        self.torn_reads = 0
        self.torn_examples: list[str] = []
        self.long_reader_unstable = 0
        self.round_throughputs: list[float] = []
        self.kill_slices = 0
        self.kills = 0
        self.kills_while_writing = 0
        self.kills_while_opening = 0
        self.full_stops = 0
        self.verifications = 0
        self.acknowledged_across_kills = 0
        self.unacknowledged_present = 0
        self.upgrade_runs = 0
        self.upgrade_kills = 0
        self.upgrade_kills_before_commit = 0
        self.upgrade_kills_with_uncommitted_work = 0
        self.upgrade_rows_checked = 0
        self.migration_seconds: list[float] = []
        self.failures: list[str] = []

    def figures(self, elapsed: float, seed: int) -> dict[str, Any]:
        ops_seconds = self.contention_seconds or 1e-9
        return {
            "environment": {
                "python": platform.python_version(),
                "sqlite": sqlite3.sqlite_version,
                "cpus": __import__("os").cpu_count(),
                "platform": platform.platform(),
                "seed": seed,
                "minutes": round(elapsed / 60, 2),
            },
            "contention": {
                "rounds": self.contention_rounds,
                "operations": self.operations,
                "appends_acknowledged": self.appends,
                "writes_per_second": round(self.operations / ops_seconds, 1),
                "writes_per_second_per_round": [round(x, 1) for x in self.round_throughputs],
                "p50_ms": round(statistics.median(self.latencies), 2) if self.latencies else None,
                "p99_ms": round(_harness.percentile(self.latencies, 0.99), 2) if self.latencies else None,
                "max_ms": round(max(self.latencies), 2) if self.latencies else None,
                "retries": self.retries,
                "writer_errors": len(self.writer_errors),
                "reader_operations": self.reader_operations,
                "reader_errors": len(self.reader_errors),
                "torn_reads": self.torn_reads,
                "torn_examples": self.torn_examples[:5],
                "long_reader_unstable_rounds": self.long_reader_unstable,
            },
            "kill_loop": {
                "slices": self.kill_slices,
                "kills": self.kills,
                "kills_while_writing": self.kills_while_writing,
                "kills_while_starting_or_opening": self.kills_while_opening,
                "all_writers_killed_at_once": self.full_stops,
                "verifications": self.verifications,
                "acknowledged_messages_checked": self.acknowledged_across_kills,
                "committed_but_unacknowledged": self.unacknowledged_present,
            },
            "upgrade_kills": {
                "runs": self.upgrade_runs,
                "kills": self.upgrade_kills,
                "kills_before_commit": self.upgrade_kills_before_commit,
                "kills_with_uncommitted_work_on_disk": self.upgrade_kills_with_uncommitted_work,
                "legacy_rows_checked": self.upgrade_rows_checked,
                "uninterrupted_upgrade_seconds": (
                    round(statistics.median(self.migration_seconds), 3) if self.migration_seconds else None
                ),
            },
            "data_lost": 0 if not self.failures else "see failures",
            "failures": self.failures,
        }


def contention_round(totals: Totals, workdir: Path, args: argparse.Namespace, seed: int) -> None:
    result = _harness.run_contention(
        workdir, writers=args.writers, readers=args.readers, ops_per_writer=args.ops_per_writer, seed=seed
    )
    totals.contention_rounds += 1
    totals.operations += result.operations
    totals.appends += result.appends
    totals.contention_seconds += result.seconds
    totals.round_throughputs.append(result.writes_per_second)
    totals.latencies.extend(result.latencies_ms)
    totals.retries += result.retries
    totals.writer_errors += result.writer_errors
    totals.reader_operations += result.reader_operations
    totals.reader_errors += result.reader_errors
    totals.torn_reads += result.torn_reads
    totals.torn_examples += result.torn_examples
    totals.long_reader_unstable += int(not result.long_reader_stable)
    if result.verification_error:
        totals.failures.append(f"contention round {seed}: {result.verification_error}")
    if result.writer_errors:
        totals.failures.append(f"contention round {seed}: writer errors {result.writer_errors[:3]}")
    if result.reader_errors:
        totals.failures.append(f"contention round {seed}: reader errors {result.reader_errors[:3]}")
    print(
        f"  contention: {result.operations} ops in {result.seconds:.1f}s = {result.writes_per_second}/s, "
        f"p50 {result.p50_ms} ms, p99 {result.p99_ms} ms, retries {result.retries}, "
        f"reader ops {result.reader_operations}, torn reads {result.torn_reads}",
        flush=True,
    )


def kill_slice(totals: Totals, workdir: Path, seconds: float, seed: int) -> None:
    result = _harness.run_kill_loop(
        workdir, kills=10**9, writers=3, seed=seed, deadline=time.monotonic() + seconds
    )
    totals.kill_slices += 1
    totals.kills += result.kills
    totals.kills_while_writing += result.kills_while_writing
    totals.kills_while_opening += result.kills_while_opening
    totals.full_stops += result.full_stops
    totals.verifications += result.verifications
    totals.acknowledged_across_kills += result.acknowledged
    totals.unacknowledged_present += result.unacknowledged_present
    print(
        f"  kill loop: {result.kills} kills, {result.verifications} verifications, "
        f"{result.acknowledged} acknowledged messages all present",
        flush=True,
    )


def upgrade_slice(totals: Totals, workdir: Path, args: argparse.Namespace, seed: int, template: Path) -> None:
    result = _harness.run_migration_kills(
        workdir,
        kills=args.upgrade_kills,
        sessions=args.legacy_sessions,
        per_session=args.legacy_messages,
        seed=seed,
        template=template,
    )
    totals.upgrade_runs += 1
    totals.upgrade_kills += result.kills
    totals.upgrade_kills_before_commit += result.kills_before_commit
    totals.upgrade_kills_with_uncommitted_work += result.kills_with_uncommitted_work
    totals.upgrade_rows_checked += result.messages + result.sessions
    totals.migration_seconds.append(result.migration_seconds)
    print(
        f"  upgrade kills: {result.kills} kills ({result.kills_before_commit} before commit), "
        f"upgrade of {result.messages} messages takes {result.migration_seconds}s, completed",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = args.workdir or Path(tempfile.mkdtemp(prefix="hermes-soak-"))
    root.mkdir(parents=True, exist_ok=True)
    totals = Totals()
    started = time.monotonic()
    deadline = started + args.minutes * 60
    template = root / "legacy-template.db"
    print(f"soak: {args.minutes} min in {root}, seed {args.seed}", flush=True)
    _harness.build_large_legacy(template, sessions=args.legacy_sessions, per_session=args.legacy_messages)
    cycle = 0
    try:
        while time.monotonic() < deadline and not totals.failures:
            cycle += 1
            seed = args.seed * 1000 + cycle
            print(f"cycle {cycle} ({(time.monotonic() - started) / 60:.1f} min)", flush=True)
            contention_round(totals, root / f"contention-{cycle}", args, seed)
            if totals.failures or time.monotonic() >= deadline:
                break
            remaining = deadline - time.monotonic()
            kill_slice(
                totals, root / f"kills-{cycle}", min(args.kill_seconds, max(5.0, remaining * 0.6)), seed
            )
            if time.monotonic() >= deadline:
                break
            upgrade_slice(totals, root / f"upgrade-{cycle}", args, seed, template)
            for name in (f"contention-{cycle}", f"kills-{cycle}", f"upgrade-{cycle}"):
                if not args.keep:
                    shutil.rmtree(root / name, ignore_errors=True)
    except _harness.VerificationError as exc:
        totals.failures.append(str(exc))
    elapsed = time.monotonic() - started
    figures = totals.figures(elapsed, args.seed)
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if totals.failures:
        print(f"FAILED — files kept in {root}", file=sys.stderr)
        return 1
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
