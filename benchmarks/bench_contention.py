"""Several writer processes appending to one database file at the same time.

For each writer count (4 and 8 in a full run) and each side, a fresh database gets one session
per writer; then the writers — separate processes (forked where the platform can) — open their own store,
wait on a barrier and append a fixed number of messages each as fast as they can, recording every
id ``append_message`` acknowledged, every exception, and every call's latency.

Afterwards the parent reads the file with plain ``sqlite3``: an acknowledged id missing from the
writer's session is a *lost* message. Throughput is all acknowledged messages divided by the
span from the first writer's start to the last writer's end (``perf_counter`` is system-wide
on Linux). Rounds alternate between the sides; throughput and p99 are medians over rounds,
lost messages and errors are totals.
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from collections.abc import Callable
from contextlib import closing
from multiprocessing import get_all_start_methods, get_context
from pathlib import Path
from typing import Any

from benchmarks.config import RunConfig
from benchmarks.datasets import create_empty, remove_db
from benchmarks.report import Figure, Target
from benchmarks.timing import median, percentile
from benchmarks.workload import generate_sessions

__all__ = ["run", "run_writers"]

SCENARIO = "contention"

MessageArgs = tuple[str, Any, str | None, Any, str | None, int | None, str | None, str | None]


def _open(kind: str, path: str) -> Any:
    if kind == "baseline":
        from benchmarks.baseline_sqlite import BaselineStore

        return BaselineStore(path)
    from hermes_store import SessionDB

    return SessionDB(path)


def _writer(
    kind: str, path: str, session_id: str, messages: list[MessageArgs], barrier: Any, results: Any
) -> None:
    """Worker process: open a store, wait for the others, append, report what was acknowledged."""
    outcome: dict[str, Any] = {"session_id": session_id, "ids": [], "latencies": [], "errors": []}
    db = None
    try:
        db = _open(kind, path)
    except Exception as exc:
        outcome["errors"].append(f"open: {exc!r}"[:300])
    barrier.wait(timeout=120)
    clock = time.perf_counter
    outcome["start"] = clock()
    if db is not None:
        for (
            role,
            content,
            tool_name,
            tool_calls,
            tool_call_id,
            token_count,
            finish_reason,
            reasoning,
        ) in messages:
            t0 = clock()
            try:
                new_id = db.append_message(
                    session_id,
                    role,
                    content=content,
                    tool_name=tool_name,
                    tool_calls=tool_calls,
                    tool_call_id=tool_call_id,
                    token_count=token_count,
                    finish_reason=finish_reason,
                    reasoning=reasoning,
                )
            except Exception as exc:
                outcome["errors"].append(repr(exc)[:300])
                continue
            outcome["latencies"].append(clock() - t0)
            outcome["ids"].append(new_id)
    outcome["end"] = clock()
    if db is not None:
        try:
            db.close()
        except Exception as exc:
            outcome["errors"].append(f"close: {exc!r}"[:300])
    results.put(outcome)


def run_writers(kind: str, path: Path, writers: int, per_writer: int, seed: int) -> dict[str, Any]:
    """One contention run of ``writers`` processes on a fresh file; returns the measured outcome."""
    remove_db(path)
    create_empty(kind, path)
    generated = list(generate_sessions(writers, per_writer, seed + 2))
    setup = _open(kind, str(path))
    try:
        for session in generated:
            setup.create_session(f"{session.id}-w", session.source, model=session.model)
    finally:
        setup.close()
    # fork where available: writers start in milliseconds instead of re-importing SQLAlchemy. The
    # parent holds no open database connection at this point (the set-up store is closed).
    ctx: Any = get_context("fork" if "fork" in get_all_start_methods() else "spawn")
    barrier = ctx.Barrier(writers + 1)
    results = ctx.Queue()
    procs = []
    for session in generated:
        messages: list[MessageArgs] = [
            (
                m.role,
                m.content,
                m.tool_name,
                m.tool_calls,
                m.tool_call_id,
                m.token_count,
                m.finish_reason,
                m.reasoning,
            )
            for m in session.messages
        ]
        proc = ctx.Process(
            target=_writer, args=(kind, str(path), f"{session.id}-w", messages, barrier, results)
        )
        proc.start()
        procs.append(proc)
    barrier.wait(timeout=120)
    outcomes = [results.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    acked = sum(len(o["ids"]) for o in outcomes)
    errors = [e for o in outcomes for e in o["errors"]]
    lost = 0
    unacked = 0
    with closing(sqlite3.connect(path)) as conn:
        for o in outcomes:
            present = {
                row[0]
                for row in conn.execute("SELECT id FROM messages WHERE session_id = ?", (o["session_id"],))
            }
            lost += len(set(o["ids"]) - present)
            unacked += len(present - set(o["ids"]))
    span = max(o["end"] for o in outcomes) - min(o["start"] for o in outcomes)
    latencies = [x for o in outcomes for x in o["latencies"]]
    return {
        "throughput": acked / span if span > 0 else 0.0,
        "p99": percentile(latencies, 99) if latencies else float("nan"),
        "lost": lost,
        "unacked": unacked,
        "errors": errors,
        "acked": acked,
        "exit_codes": [p.exitcode for p in procs],
    }


def run(cfg: RunConfig, work_dir: Path, log: Callable[[str], None] = print) -> list[Figure]:
    """Contention runs for every writer count, alternating sides; four figures per writer count."""
    figures: list[Figure] = []
    work_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="contention-", dir=work_dir) as tmp:
        for writers in cfg.contention_writers:
            outcome: dict[str, list[dict[str, Any]]] = {"baseline": [], "store": []}
            for r in range(cfg.contention_rounds):
                order = ["baseline", "store"] if r % 2 == 0 else ["store", "baseline"]
                for kind in order:
                    result = run_writers(
                        kind,
                        Path(tmp) / f"{kind}-{writers}-{r}.db",
                        writers,
                        cfg.contention_messages,
                        cfg.seed + r,
                    )
                    outcome[kind].append(result)
                    remove_db(Path(tmp) / f"{kind}-{writers}-{r}.db")
                    log(
                        f"  {writers} writers, {kind:<8} round {r + 1}: {result['throughput']:,.0f} msg/s, "
                        f"p99 {result['p99'] * 1e3:.1f} ms, lost {result['lost']}, "
                        f"errors {len(result['errors'])}"
                    )
                    for error in result["errors"][:3]:
                        log(f"      error: {error}")
            base, store = outcome["baseline"], outcome["store"]
            note = f"{writers} x {cfg.contention_messages} messages, {cfg.contention_rounds} round(s)"
            paired = ", ".join(
                f"{s['throughput'] / b['throughput']:.2f}" for b, s in zip(base, store, strict=True)
            )
            figures += [
                Figure(
                    SCENARIO,
                    f"{writers} writers: throughput",
                    "msg/s",
                    median([o["throughput"] for o in base]),
                    median([o["throughput"] for o in store]),
                    Target("ratio_min", 0.9),
                    note=f"{note}; store/baseline in each round: {paired}",
                ),
                Figure(
                    SCENARIO,
                    f"{writers} writers: append p99",
                    "s",
                    median([o["p99"] for o in base]),
                    median([o["p99"] for o in store]),
                    note=note,
                ),
                Figure(
                    SCENARIO,
                    f"{writers} writers: lost messages",
                    "count",
                    sum(o["lost"] for o in base),
                    sum(o["lost"] for o in store),
                    Target("store_zero"),
                    note=f"unacknowledged rows present: baseline {sum(o['unacked'] for o in base)}, "
                    f"store {sum(o['unacked'] for o in store)}",
                ),
                Figure(
                    SCENARIO,
                    f"{writers} writers: errors",
                    "count",
                    sum(len(o["errors"]) for o in base),
                    sum(len(o["errors"]) for o in store),
                    Target("store_zero"),
                    note=note,
                ),
            ]
    return figures
