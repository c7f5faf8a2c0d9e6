"""Profile one hermes_store operation on the cached benchmark database with cProfile.

Used to find where hermes_store loses against the baseline. Run a benchmark first so the cached
database exists, then for example::

    python -m benchmarks.profile_store search quistend
    python -m benchmarks.profile_store search quistend --source telegram
    python -m benchmarks.profile_store listing --source telegram
    python -m benchmarks.profile_store listing --offset 10000
    python -m benchmarks.profile_store conversation
    python -m benchmarks.profile_store append          # fresh file on /dev/shm: no fsync cost
    python -m benchmarks.profile_store search quistend --baseline   # same call on the baseline

Prints the top functions by cumulative and by own time, and the mean wall time per call with and
without the profiler (the profiler inflates Python-heavy code more than SQLite-heavy code).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.config import FULL, QUICK
from benchmarks.datasets import ensure_dataset

REPO_ROOT = Path(__file__).resolve().parent.parent


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.profile_store", description=__doc__.splitlines()[0]
    )
    parser.add_argument("operation", choices=("search", "listing", "conversation", "append"))
    parser.add_argument("query", nargs="?", default="", help="search query")
    parser.add_argument("--source", help="source filter (search) or source (listing)")
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--top", type=int, default=35)
    parser.add_argument("--baseline", action="store_true", help="profile the baseline instead")
    parser.add_argument("--quick", action="store_true", help="use the --quick database")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--cache-dir", type=Path, default=REPO_ROOT / "bench-results")
    return parser.parse_args(argv)


def _open(baseline: bool, path: Path) -> Any:
    if baseline:
        from benchmarks.baseline_sqlite import BaselineStore

        return BaselineStore(path)
    from hermes_store import SessionDB

    return SessionDB(path)


def main(argv: Sequence[str] | None = None) -> int:
    """Profile the chosen operation; returns 0."""
    args = _parse(argv)
    cfg = (QUICK if args.quick else FULL)(args.seed, args.cache_dir.resolve())
    fn: Callable[[], object]
    if args.operation == "append":
        from benchmarks.workload import generate_sessions

        tmp = Path(tempfile.mkdtemp(dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
        db = _open(args.baseline, tmp / "append.db")
        sessions = list(generate_sessions(max(1, args.calls // 50), 50, args.seed))
        for s in sessions:
            db.create_session(s.id, s.source)
        pending = [(s.id, m) for s in sessions for m in s.messages] * 1000

        def fn() -> object:
            sid, m = pending.pop()
            return db.append_message(
                sid,
                m.role,
                content=m.content,
                tool_name=m.tool_name,
                tool_calls=m.tool_calls,
                tool_call_id=m.tool_call_id,
                token_count=m.token_count,
                finish_reason=m.finish_reason,
            )
    else:
        dataset = ensure_dataset(cfg.dataset, cfg.cache_dir)
        db = _open(args.baseline, dataset.baseline_path if args.baseline else dataset.store_path)
        if args.operation == "search":
            kwargs = {"source_filter": [args.source]} if args.source else {}

            def fn() -> object:
                return db.search_messages(args.query, **kwargs)
        elif args.operation == "listing":

            def fn() -> object:
                return db.list_sessions_rich(source=args.source, offset=args.offset)
        else:

            def fn() -> object:
                return db.get_messages_as_conversation(dataset.long_session_id)

    fn()
    t0 = time.perf_counter()
    for _ in range(args.calls):
        fn()
    plain = (time.perf_counter() - t0) / args.calls
    profiler = cProfile.Profile()
    t0 = time.perf_counter()
    profiler.enable()
    for _ in range(args.calls):
        fn()
    profiler.disable()
    profiled = (time.perf_counter() - t0) / args.calls
    db.close()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(args.top)
    stats.sort_stats("tottime").print_stats(args.top)
    print(out.getvalue())
    print(f"{args.operation}: {plain * 1e3:.3f} ms per call ({profiled * 1e3:.3f} ms under the profiler)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
