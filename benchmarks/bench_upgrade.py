"""Upgrades timed: a version-9 legacy upstream file to head (wall time and peak memory), and,
as ``python -m benchmarks.bench_upgrade``, a PostgreSQL store upgraded online from 0011 while
the running release keeps calling it (:func:`run_pg_online`).

The legacy file is what upstream Hermes wrote at schema version 9: the version-1 tables with
the columns versions 2-9 added, the unique title index (v4), and ``messages_fts`` as an
*external-content* FTS5 table over ``messages.content`` fed by ``'delete'``-command triggers;
no trigram index, no ``state_meta``. It is built with plain ``sqlite3`` and filled from the
benchmark's source rows (the first N messages and their sessions), once per size, and copied
for every run because upgrading changes it.

Each upgrade runs in a fresh process that reports the seconds spent in the call, its resident set
just before the call and its peak resident set during the call (Linux ``VmHWM``, reset through
``/proc/self/clear_refs`` right before the call; ``ru_maxrss`` cannot be used because Linux keeps
the parent's high-water mark across ``execve``):

* baseline — :func:`baseline_upgrade`, upstream's own path at v11: main
  schema script, column reconciliation, the v10 step (inline trigram table + content backfill),
  the v11 step (drop both indexes and triggers, recreate inline, backfill every row), the
  version bump and the title index, in autocommit mode;
* store — ``hermes_store.upgrade(path)``: adoption, then Alembic revisions 0010 and 0011 in one
  write transaction.

Two sizes are upgraded so the peak memory at the larger size can be compared with the smaller
one: a streamed backfill keeps it flat.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from benchmarks.config import RunConfig
from benchmarks.datasets import Dataset, bulk_copy, remove_db
from benchmarks.report import Figure, Target
from benchmarks.timing import percentile

__all__ = ["V9_DDL", "baseline_upgrade", "build_legacy_v9", "run"]

SCENARIO = "upgrade v9"
REPO_ROOT = Path(__file__).resolve().parent.parent

V9_DDL = (
    "CREATE TABLE schema_version (version INTEGER NOT NULL)",
    """CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    user_id TEXT,
    model TEXT,
    model_config TEXT,
    system_prompt TEXT,
    parent_session_id TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER DEFAULT 0,
    tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0,
    output_tokens INTEGER DEFAULT 0,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id)
)""",
    """CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_calls TEXT,
    tool_name TEXT,
    timestamp REAL NOT NULL,
    token_count INTEGER
)""",
    "CREATE INDEX idx_sessions_source ON sessions(source)",
    "CREATE INDEX idx_sessions_parent ON sessions(parent_session_id)",
    "CREATE INDEX idx_sessions_started ON sessions(started_at DESC)",
    "CREATE INDEX idx_messages_session ON messages(session_id, timestamp)",
    """CREATE VIRTUAL TABLE messages_fts USING fts5(
    content,
    content=messages,
    content_rowid=id
)""",
    """CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END""",
    """CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES('delete', old.id, old.content);
END""",
    """CREATE TRIGGER messages_fts_update AFTER UPDATE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES('delete', old.id, old.content);
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END""",
    # v2
    "ALTER TABLE messages ADD COLUMN finish_reason TEXT",
    # v3, v4
    "ALTER TABLE sessions ADD COLUMN title TEXT",
    "CREATE UNIQUE INDEX idx_sessions_title_unique ON sessions(title) WHERE title IS NOT NULL",
    # v5
    "ALTER TABLE sessions ADD COLUMN cache_read_tokens INTEGER DEFAULT 0",
    "ALTER TABLE sessions ADD COLUMN cache_write_tokens INTEGER DEFAULT 0",
    "ALTER TABLE sessions ADD COLUMN reasoning_tokens INTEGER DEFAULT 0",
    "ALTER TABLE sessions ADD COLUMN billing_provider TEXT",
    "ALTER TABLE sessions ADD COLUMN billing_base_url TEXT",
    "ALTER TABLE sessions ADD COLUMN billing_mode TEXT",
    "ALTER TABLE sessions ADD COLUMN estimated_cost_usd REAL",
    "ALTER TABLE sessions ADD COLUMN actual_cost_usd REAL",
    "ALTER TABLE sessions ADD COLUMN cost_status TEXT",
    "ALTER TABLE sessions ADD COLUMN cost_source TEXT",
    "ALTER TABLE sessions ADD COLUMN pricing_version TEXT",
    # v6, v7, v8, v9
    "ALTER TABLE messages ADD COLUMN reasoning TEXT",
    "ALTER TABLE messages ADD COLUMN reasoning_details TEXT",
    "ALTER TABLE messages ADD COLUMN codex_reasoning_items TEXT",
    "ALTER TABLE messages ADD COLUMN reasoning_content TEXT",
    "ALTER TABLE sessions ADD COLUMN api_call_count INTEGER DEFAULT 0",
    "ALTER TABLE messages ADD COLUMN codex_message_items TEXT",
    "INSERT INTO schema_version (version) VALUES (9)",
)


def build_legacy_v9(path: Path, source: Path, messages: int) -> None:
    """Write a version-9 upstream database holding the first ``messages`` source messages."""
    partial = path.with_name(path.name + ".partial")
    remove_db(partial)
    with closing(sqlite3.connect(partial, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("BEGIN")
        for ddl in V9_DDL:
            conn.execute(ddl)
        conn.execute("COMMIT")
    bulk_copy(partial, source, max_message_id=messages)
    remove_db(path)
    os.replace(partial, path)
    remove_db(partial)


def baseline_upgrade(path: str | os.PathLike[str]) -> None:
    """Upstream's schema initialisation at v11 run on a version-9 file."""
    from benchmarks import baseline_sqlite as b

    conn = sqlite3.connect(str(path), timeout=1.0, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.executescript(b._MAIN_SCHEMA)
        for table, columns in b.BaselineStore._declared_columns().items():
            live = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
            for name, expr in columns.items():
                if name not in live:
                    with contextlib.suppress(sqlite3.OperationalError):
                        conn.execute(f'ALTER TABLE "{table}" ADD COLUMN "{name}" {expr}')
        row = conn.execute("SELECT version FROM schema_version LIMIT 1").fetchone()
        if row is None:
            conn.execute("INSERT INTO schema_version (version) VALUES (11)")
        else:
            current = int(row[0])
            if current < 10:
                try:
                    conn.execute("SELECT * FROM messages_fts_trigram LIMIT 0")
                except sqlite3.OperationalError:
                    conn.executescript(b._TRIGRAM_FTS)
                    conn.execute(
                        "INSERT INTO messages_fts_trigram(rowid, content) "
                        "SELECT id, content FROM messages WHERE content IS NOT NULL"
                    )
            if current < 11:
                for trigger in (
                    "messages_fts_insert",
                    "messages_fts_delete",
                    "messages_fts_update",
                    "messages_fts_trigram_insert",
                    "messages_fts_trigram_delete",
                    "messages_fts_trigram_update",
                ):
                    with contextlib.suppress(sqlite3.OperationalError):
                        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
                for table in ("messages_fts", "messages_fts_trigram"):
                    with contextlib.suppress(sqlite3.OperationalError):
                        conn.execute(f"DROP TABLE IF EXISTS {table}")
                conn.executescript(b._WORD_FTS)
                conn.executescript(b._TRIGRAM_FTS)
                for table in ("messages_fts", "messages_fts_trigram"):
                    conn.execute(
                        f"INSERT INTO {table}(rowid, content) SELECT id, COALESCE(content, '') || ' ' || "
                        "COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, '') FROM messages"
                    )
                conn.execute("UPDATE schema_version SET version = 11")
        with contextlib.suppress(sqlite3.OperationalError):
            conn.execute(b._TITLE_INDEX)
        for table, script in (("messages_fts", b._WORD_FTS), ("messages_fts_trigram", b._TRIGRAM_FTS)):
            try:
                conn.execute(f"SELECT * FROM {table} LIMIT 0")
            except sqlite3.OperationalError:
                conn.executescript(script)
        conn.commit()
    finally:
        conn.close()


_CHILD = """
import json, resource, time

def _mem_kb():
    # Linux: VmHWM (peak) and VmRSS (now) of this process. ru_maxrss is not used because Linux
    # carries it over execve from the parent, so it would report the benchmark runner's size.
    try:
        lines = open("/proc/self/status").read().splitlines()
        fields = dict(line.split(":", 1) for line in lines if ":" in line)
        return int(fields["VmHWM"].split()[0]), int(fields["VmRSS"].split()[0])
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak, peak

def _reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
    except OSError:
        pass

{imports}
_reset_peak()
_, _before = _mem_kb()
_t0 = time.perf_counter()
{call}
_t1 = time.perf_counter()
_peak, _ = _mem_kb()
print(json.dumps({{"seconds": _t1 - _t0, "before_kb": _before, "peak_kb": _peak}}))
"""
_CALLS = {
    "baseline": ("from benchmarks.bench_upgrade import baseline_upgrade", "baseline_upgrade({path!r})"),
    "store": ("import hermes_store", "hermes_store.upgrade({path!r})"),
}


def upgrade_in_child(kind: str, path: Path) -> dict[str, float]:
    """Upgrade ``path`` in a fresh process; returns seconds, RSS before and peak RSS during (KiB)."""
    imports, call = _CALLS[kind]
    code = _CHILD.format(imports=imports, call=call.format(path=str(path)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1800
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} upgrade failed:\n{proc.stderr[-3000:]}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _check_upgraded(path: Path) -> dict[str, Any]:
    with closing(sqlite3.connect(path)) as conn:
        return {
            "version": conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0],
            "messages": conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0],
            "fts": conn.execute("SELECT COUNT(*) FROM messages_fts").fetchone()[0],
            "trigram": conn.execute("SELECT COUNT(*) FROM messages_fts_trigram").fetchone()[0],
            "triggers": conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger'").fetchone()[
                0
            ],
        }


def run(cfg: RunConfig, dataset: Dataset, work_dir: Path, log: Callable[[str], None] = print) -> list[Figure]:
    """Upgrade a v9 file of each configured size on both sides; time, peak RSS and RSS growth figures."""
    figures: list[Figure] = []
    peaks: dict[str, list[float]] = {"baseline": [], "store": []}
    sizes = sorted(cfg.upgrade_messages)
    work_dir.mkdir(parents=True, exist_ok=True)
    for n in sizes:
        legacy = cfg.cache_dir / f"legacy-v9-{n}m-{dataset.spec.key}.db"
        if not legacy.exists():
            log(f"  building version-9 legacy database with {n:,} messages")
            build_legacy_v9(legacy, dataset.source_path, n)
        results: dict[str, dict[str, float]] = {}
        notes: list[str] = []
        with tempfile.TemporaryDirectory(prefix="upgrade-", dir=work_dir) as tmp:
            for kind in ("baseline", "store"):
                copy = Path(tmp) / f"{kind}.db"
                shutil.copyfile(legacy, copy)
                results[kind] = upgrade_in_child(kind, copy)
                state = _check_upgraded(copy)
                if not (
                    state["version"] == 11
                    and state["messages"] == state["fts"] == state["trigram"]
                    and state["triggers"] == 6
                ):
                    notes.append(f"{kind} result looks wrong: {state}")
                remove_db(copy)
                log(
                    f"  {n:,} messages, {kind:<8}: {results[kind]['seconds']:.2f} s, "
                    f"peak RSS {results[kind]['peak_kb'] / 1024:.1f} MB "
                    f"(RSS before the call {results[kind]['before_kb'] / 1024:.1f} MB)"
                )
        base, store = results["baseline"], results["store"]
        for kind in peaks:
            peaks[kind].append(results[kind]["peak_kb"] / 1024)
        note = "; ".join(notes) or "1 run per side (each run rebuilds both FTS indexes)"
        figures.append(
            Figure(SCENARIO, f"{n:,} messages: time", "s", base["seconds"], store["seconds"], note=note)
        )
        figures.append(
            Figure(
                SCENARIO,
                f"{n:,} messages: peak RSS",
                "MB",
                base["peak_kb"] / 1024,
                store["peak_kb"] / 1024,
                note=f"RSS before the call: baseline {base['before_kb'] / 1024:.1f} MB, "
                f"store {store['before_kb'] / 1024:.1f} MB; growth during the call: baseline "
                f"{(base['peak_kb'] - base['before_kb']) / 1024:.1f} MB, "
                f"store {(store['peak_kb'] - store['before_kb']) / 1024:.1f} MB",
            )
        )
    if len(sizes) >= 2:
        small, large = sizes[0], sizes[-1]
        figures.append(
            Figure(
                SCENARIO,
                f"peak RSS at {large:,} / at {small:,} messages",
                "x",
                peaks["baseline"][-1] / peaks["baseline"][0],
                peaks["store"][-1] / peaks["store"][0],
                Target("store_max", 1.1),
                note=f"{large / small:.0f}x the messages; 1.00x means memory independent of size",
            )
        )
    return figures


# --- PostgreSQL: 0011 -> head online, with the running release probing beside it ----------
#
#     python -m benchmarks.bench_upgrade --pg-url postgresql+psycopg://postgres@127.0.0.1/postgres \
#         --messages 1000000
#
# A scratch database (created and dropped here) is filled at revision 0011 by COPY
# (benchmarks.pg_bulk_load), then `hermes-store upgrade` takes it to head while two probe
# processes of the running release call the store every 50 ms: a reader (get_messages of a
# random session) and a writer (append_message). Each call's latency is a stall the service
# would see; the longest and the p99 are reported with the upgrade's wall time and the load
# average. Targets: no call over 1 s, p99 under 200 ms.

PROBE_INTERVAL_S = 0.05
STALL_MAX_S = 1.0
PROBE_P99_MAX_S = 0.2


def probe(url: str, role: str, out_path: str, stop_path: str) -> None:
    """One probe of the running release: a call every 50 ms until ``stop_path`` exists.

    The running release opened its store before the upgrade began, so the probe opens
    the store without the open-time schema check (which would migrate the database itself).
    """
    import random
    import time

    import hermes_store.api.session_db as session_db_module

    session_db_module.ensure_schema = lambda engine, *args, **kwargs: None  # type: ignore[assignment]
    db = session_db_module.SessionDB(url=url)
    with db.engine.connect() as connection:
        session_ids = list(connection.exec_driver_sql("SELECT id FROM sessions LIMIT 2000").scalars())
    if role == "writer":
        db.create_session(f"probe-{os.getpid()}", "probe")
    samples: list[tuple[float, float, str]] = []
    while not os.path.exists(stop_path):
        started = time.perf_counter()
        error = ""
        try:
            if role == "reader":
                db.get_messages(random.choice(session_ids))
            else:
                db.append_message(f"probe-{os.getpid()}", "user", "probe message written during the upgrade")
        except Exception as exc:  # a failed call is a stall too: recorded, not fatal
            error = type(exc).__name__
        elapsed = time.perf_counter() - started
        samples.append((time.time(), elapsed, error))
        time.sleep(max(0.0, PROBE_INTERVAL_S - elapsed))
    db.close()
    Path(out_path).write_text(json.dumps(samples))


def run_pg_online(
    admin_url: str, messages: int, cache: Path, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Load ``messages`` at 0011 into a scratch database, upgrade it online with probes running."""
    import time
    import uuid

    import sqlalchemy as sa

    from benchmarks.datasets import DatasetSpec
    from benchmarks.pg_bulk_load import load_postgres

    spec = DatasetSpec(max(1, (messages - 500) // 20) + 1, 20, 500, 7)
    source = cache / f"source-{spec.key}.db"
    if not source.exists():
        from benchmarks.datasets import build_source

        log(f"generating {spec.message_total:,} messages -> {source}")
        build_source(spec, source)
    admin = sa.make_url(admin_url)
    name = f"hermes_bench_upgrade_{uuid.uuid4().hex[:8]}"
    admin_engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
    with admin_engine.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    url = admin.set(database=name).render_as_string(hide_password=False)
    try:
        log(f"loading {spec.message_total:,} messages at 0011 into {name}")
        load_postgres(url, source, log=log, upgrade_from="0011", then_upgrade=False)
        work = Path(tempfile.mkdtemp(prefix="bench-upgrade-"))
        stop = work / "stop"
        probes = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    f"from benchmarks.bench_upgrade import probe; "
                    f"probe({url!r}, {role!r}, {str(work / role)!r}, {str(stop)!r})",
                ],
                cwd=REPO_ROOT,
            )
            for role in ("reader", "writer")
        ]
        time.sleep(3.0)  # both probes connected and calling
        load_before = os.getloadavg()
        upgrade_wall = time.time()
        started = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "hermes_store.cli", "--url", url, "upgrade"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        upgrade_s = time.perf_counter() - started
        load_after = os.getloadavg()
        time.sleep(1.0)
        stop.touch()
        for process in probes:
            process.wait(timeout=60)
        if result.returncode != 0:
            raise RuntimeError(f"upgrade failed: {result.stderr}")
        figures: dict[str, Any] = {
            "messages": spec.message_total,
            "upgrade_s": round(upgrade_s, 1),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in load_after],
        }
        for role in ("reader", "writer"):
            # Every call from 3 s before the upgrade to 1 s after it.
            samples = json.loads((work / role).read_text())
            latencies = [sample[1] for sample in samples]
            slowest = sorted(samples, key=lambda sample: sample[1], reverse=True)[:5]
            figures[role] = {
                # When the slowest calls started, in seconds after the upgrade did.
                "slowest": [[round(s[0] - s[1] - upgrade_wall, 1), round(s[1] * 1e3)] for s in slowest],
                "calls": len(latencies),
                "errors": sum(1 for sample in samples if sample[2]),
                "max_ms": round(max(latencies) * 1e3, 1),
                "p99_ms": round(percentile(latencies, 99) * 1e3, 1),
                "p50_ms": round(percentile(latencies, 50) * 1e3, 1),
            }
        shutil.rmtree(work, ignore_errors=True)
        return figures
    finally:
        with admin_engine.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin_engine.dispose()


def main() -> None:
    """``python -m benchmarks.bench_upgrade --pg-url … --messages N``: the online upgrade figures."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pg-url", required=True, help="a server on which a scratch database may be created")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--cache", type=Path, default=Path("bench-results"))
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    figures = run_pg_online(args.pg_url, args.messages, args.cache)
    print(json.dumps(figures, indent=2))
    worst = max(figures[role]["max_ms"] for role in ("reader", "writer"))
    p99 = max(figures[role]["p99_ms"] for role in ("reader", "writer"))
    print(
        f"longest stall {worst:.0f} ms (target {STALL_MAX_S * 1e3:.0f}), p99 {p99:.0f} ms "
        f"(target {PROBE_P99_MAX_S * 1e3:.0f})"
    )


if __name__ == "__main__":
    main()
