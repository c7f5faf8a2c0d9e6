"""Retention while agents work: how long an agent's append and a reader's read wait while
half of a store is pruned, hermes_store against upstream Hermes on the same data.

A store of ``--messages`` messages (sessions of 100) is built once; half its sessions
ended 200 days ago. Then, for each side, on a copy of that file: an *agent* process
appends to a live session every 20 ms and a *reader* process reads another live session
every 20 ms, while the main process runs ``prune_sessions(older_than_days=90)``. Printed:
the prune's duration, the agent's and the reader's longest and 99th-percentile waits, and
the appends that failed. Upstream prunes in one transaction; hermes_store in batches.

::

    python -m benchmarks.bench_retention [--messages 200000] [--url postgresql+psycopg://…]

With ``--url`` (an empty PostgreSQL database, which is filled) only hermes_store runs.
Afterwards: ``vacuum`` on SQLite (timed here too), autovacuum on PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

from benchmarks.bench_targets import load_average
from benchmarks.upstream import HEAD_COMMIT, upstream_folder
from hermes_store import SessionDB

REPO_ROOT = Path(__file__).resolve().parent.parent
PER_SESSION = 100
PERIOD_S = 0.02

WORKER = """
import json, sys, time
from pathlib import Path
side, target, role, stop, out, upstream = sys.argv[1:7]
if side == "upstream":
    from benchmarks.upstream import upstream_session_db
    db = upstream_session_db(Path(upstream), "upstream_hermes_state_head")(db_path=Path(target))
elif target.startswith("postgresql"):
    from hermes_store import SessionDB
    db = SessionDB(url=target)
else:
    from hermes_store import SessionDB
    db = SessionDB(target)
waits, errors = [], []
print("ready", flush=True)
while not Path(stop).exists():
    started = time.perf_counter()
    try:
        if role == "agent":
            db.append_message("live-agent", "user", "still working")
        else:
            db.get_messages("live-reader")
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}"[:200])
    waits.append(time.perf_counter() - started)
    time.sleep(0.02)
Path(out).write_text(json.dumps({"waits": waits, "errors": errors}))
"""


def open_ours(target: str) -> SessionDB:
    return SessionDB(url=target) if target.startswith("postgresql") else SessionDB(target)


def build(target: str, messages: int) -> None:
    """Fill ``target`` (a file path or a server URL): half the sessions 200 days old."""
    db = open_ours(target)
    words = ["docker", "build", "cache", "layer", "python", "error", "fix", "retry", "lisbon", "tool"]
    for n in range(messages // PER_SESSION):
        session_id = f"s{n:06d}"
        db.create_session(session_id, "cli")
        turn = [
            {"role": "user", "content": f"{words[k % 10]} {words[(k * 7 + n) % 10]} {k}"}
            for k in range(PER_SESSION)
        ]
        db.append_messages(session_id, turn)
        db.end_session(session_id, "done")
    ageing = text("UPDATE sessions SET started_at = :old WHERE CAST(SUBSTR(id, 2) AS INTEGER) % 2 = 0")
    db.unit_of_work.write_connection(
        lambda c: c.execute(ageing, {"old": time.time() - 200 * 86400}), "ageing half the sessions"
    )
    for live in ("live-agent", "live-reader"):
        db.create_session(live, "cli")
        db.append_message(live, "user", "hello")
    db.close()


Workers = list[tuple[subprocess.Popen[str], Path]]


def _workers(side: str, target: str, folder: Path, upstream: Path | None) -> Workers:
    """The agent and the reader processes, started and ready, with their result files."""
    started = []
    for role in ("agent", "reader"):
        out = folder / f"{side}-{role}.json"
        process = subprocess.Popen(
            [sys.executable, "-c", WORKER, side, target, role, str(folder / "stop"), str(out), str(upstream)],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        started.append((process, out))
    return started


def _prune(side: str, target: str, upstream: Path | None) -> float:
    if side == "upstream":
        from benchmarks.upstream import upstream_session_db

        assert upstream is not None
        db = upstream_session_db(upstream, "upstream_hermes_state_head")(db_path=Path(target))
    else:
        db = open_ours(target)
    started = time.perf_counter()
    db.prune_sessions(older_than_days=90)
    took = time.perf_counter() - started
    db.close()
    return took


def run_side(side: str, target: str, folder: Path, upstream: Path | None) -> dict[str, object]:
    """Prune ``target`` while an agent and a reader work on it; their waits."""
    (folder / "stop").unlink(missing_ok=True)
    workers = _workers(side, target, folder, upstream)
    time.sleep(1.0)
    took = _prune(side, target, upstream)
    time.sleep(1.0)
    (folder / "stop").touch()
    figures: dict[str, object] = {"side": side, "prune_s": took}
    for (process, out), role in zip(workers, ("agent", "reader"), strict=True):
        process.wait(120)
        if process.stdout is not None:
            process.stdout.close()
        result = json.loads(out.read_text())
        waits = sorted(result["waits"])
        figures[f"{role}_max_ms"] = waits[-1] * 1000
        figures[f"{role}_p99_ms"] = waits[int(len(waits) * 0.99) - 1] * 1000
        figures[f"{role}_errors"] = len(result["errors"])
    return figures


def vacuum_s(path: str) -> float:
    db = open_ours(path)
    started = time.perf_counter()
    db.vacuum()
    took = time.perf_counter() - started
    db.close()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--url", help="an empty PostgreSQL database to fill and prune (hermes_store only)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="hermes-retention-"))
    try:
        rows = []
        if args.url:
            build(args.url, args.messages)
            rows.append(run_side("hermes_store", args.url, folder, None))
        else:
            built = folder / "built.db"
            build(str(built), args.messages)
            upstream = upstream_folder(HEAD_COMMIT)
            for side in ("hermes_store", "upstream") if upstream else ("hermes_store",):
                copy = folder / f"{side}.db"
                shutil.copyfile(built, copy)
                rows.append(run_side(side, str(copy), folder, upstream))
            rows[0]["vacuum_s"] = vacuum_s(str(folder / "hermes_store.db"))
        print(f"prune half of {args.messages:,} messages, load average {load_average()}")
        for row in rows:
            print(json.dumps(row))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
