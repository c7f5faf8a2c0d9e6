"""``append_message`` in one process: throughput and per-call p50/p99 latency.

Every round writes the same generated sessions into fresh database files, one per contender,
one call per message (the session is created first, untimed in the latency lists):

* the plain-``sqlite3`` baseline;
* ``hermes_store.SessionDB``;
* hermes_store's repository layer without the facade: ``UnitOfWork.write_connection``
  running ``repository.messages.append`` (what the facade adds on top is its argument encoding).

The order of the contenders rotates from round to round. Throughput is messages divided by the
time spent inside ``append_message``; each figure is the median over rounds of that round's value.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.baseline_sqlite import BaselineStore
from benchmarks.config import RunConfig
from benchmarks.datasets import remove_db
from benchmarks.protocol import load_workload
from benchmarks.report import Figure, Target
from benchmarks.timing import median, percentile
from benchmarks.workload import generate_sessions

__all__ = ["RepositoryStore", "run"]

SCENARIO = "append"


class RepositoryStore:
    """hermes_store's unit of work and repository functions, without the ``SessionDB`` facade."""

    def __init__(self, path: str | Path) -> None:
        from hermes_store.db.engine import create_engine
        from hermes_store.schema.migrate import ensure_schema
        from hermes_store.uow.unit_of_work import UnitOfWork

        self.engine = create_engine(path)
        ensure_schema(self.engine)
        self.uow = UnitOfWork(self.engine)

    def create_session(
        self, session_id: str, source: str, model: str | None = None, parent_session_id: str | None = None
    ) -> str:
        from hermes_store.repository import sessions

        self.uow.write(
            lambda db: sessions.insert_session(
                db, session_id, source, model=model, parent_session_id=parent_session_id
            ),
            "creating a session",
        )
        return session_id

    def append_message(
        self,
        session_id: str,
        role: str,
        content: Any = None,
        tool_name: str | None = None,
        tool_calls: Any = None,
        tool_call_id: str | None = None,
        token_count: int | None = None,
        finish_reason: str | None = None,
        reasoning: str | None = None,
    ) -> int:
        from hermes_store.domain import codec
        from hermes_store.repository import messages

        message = messages.NewMessage(
            role=role,
            content=codec.encode_content(content),
            tool_call_id=tool_call_id,
            tool_calls=codec.encode_json(tool_calls),
            tool_name=tool_name,
            token_count=token_count,
            finish_reason=finish_reason,
            reasoning=reasoning,
            tool_call_units=codec.count_tool_calls(tool_calls),
        )
        return self.uow.write_connection(
            lambda db: messages.append(db, session_id, message), "appending a message"
        )

    def close(self) -> None:
        self.uow.close()


def _session_db(path: Path) -> Any:
    from hermes_store import SessionDB

    return SessionDB(path)


def _in_memory_fs() -> Path | None:
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else None


def run(cfg: RunConfig, work_dir: Path, log: Callable[[str], None] = print) -> list[Figure]:
    """Run ``cfg.append_rounds`` rounds; return throughput, p50 and p99 figures.

    When ``/dev/shm`` exists, each round also appends on a tmpfs file for the baseline and the
    store: without the fsync of every commit, the p50 there is the software cost of one append
    (the time a writer holds the write lock, which is what contention throughput depends on).
    """
    sessions = list(generate_sessions(cfg.append_sessions, cfg.append_messages_per_session, cfg.seed + 1))
    contenders: list[tuple[str, Callable[[Path], Any]]] = [
        ("baseline", BaselineStore),
        ("store", _session_db),
        ("repository", RepositoryStore),
    ]
    per_round: dict[str, dict[str, list[float]]] = {
        name: {"throughput": [], "p50": [], "p99": []} for name, _ in contenders
    }
    shm = _in_memory_fs()
    cpu_p50: dict[str, list[float]] = {"baseline": [], "store": []}
    work_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="append-", dir=work_dir) as tmp:
        for r in range(cfg.append_rounds):
            shift = r % len(contenders)
            for name, factory in contenders[shift:] + contenders[:shift]:
                path = Path(tmp) / f"{name}-{r}.db"
                db = factory(path)
                try:
                    report = load_workload(db, sessions, with_titles=False)
                finally:
                    db.close()
                remove_db(path)
                lat = report.append_latencies
                stats = per_round[name]
                stats["throughput"].append(len(lat) / sum(lat))
                stats["p50"].append(percentile(lat, 50))
                stats["p99"].append(percentile(lat, 99))
            if shm is not None:
                for name, factory in contenders[:2] if r % 2 == 0 else contenders[1::-1]:
                    with tempfile.TemporaryDirectory(prefix="hermes-bench-append-", dir=shm) as mem:
                        db = factory(Path(mem) / "append.db")
                        try:
                            report = load_workload(db, sessions, with_titles=False)
                        finally:
                            db.close()
                    cpu_p50[name].append(percentile(report.append_latencies, 50))
            log(
                f"  round {r + 1}/{cfg.append_rounds}: "
                + ", ".join(f"{n} {per_round[n]['throughput'][-1]:,.0f} msg/s" for n, _ in contenders)
            )
    n = sum(len(s.messages) for s in sessions)
    base, store, repo = (per_round[name] for name, _ in contenders)
    note = f"{n:,} appends per round, median of {cfg.append_rounds} rounds"
    paired = ", ".join(f"{st / b:.2f}" for b, st in zip(base["throughput"], store["throughput"], strict=True))
    throughput_note = f"{note}; store/baseline in each round: {paired}"
    return [
        Figure(
            SCENARIO,
            "append_message throughput",
            "msg/s",
            median(base["throughput"]),
            median(store["throughput"]),
            Target("ratio_min", 0.9),
            note=throughput_note,
        ),
        Figure(SCENARIO, "append_message p50", "s", median(base["p50"]), median(store["p50"]), note=note),
        Figure(
            SCENARIO,
            "append_message p99",
            "s",
            median(base["p99"]),
            median(store["p99"]),
            Target("ratio_max", 1.2),
            note=note,
        ),
        *(
            [
                Figure(
                    SCENARIO,
                    "append_message p50 on tmpfs (no fsync: software cost)",
                    "s",
                    median(cpu_p50["baseline"]),
                    median(cpu_p50["store"]),
                    note="no target; time spent holding the write lock per append",
                ),
            ]
            if cpu_p50["store"]
            else []
        ),
        Figure(
            SCENARIO,
            "repository layer (UnitOfWork + messages.append) throughput",
            "msg/s",
            median(base["throughput"]),
            median(repo["throughput"]),
            note="no target; facade excluded",
        ),
        Figure(
            SCENARIO,
            "repository layer p99",
            "s",
            median(base["p99"]),
            median(repo["p99"]),
            note="no target; facade excluded",
        ),
    ]
