"""Session listings and conversation replay on the bulk-loaded database.

* ``list_sessions_rich()`` — the first page (20) of 20,000 sessions, newest first;
* ``list_sessions_rich(source=...)`` — the first page of one source;
* ``list_sessions_rich(offset=N)`` — a page deep in the list;
* ``get_messages_as_conversation`` of the one 500-message session.

Each listing row costs a preview and a last-activity subquery, and a compression root costs a
walk to its tip; both stores do that work in SQL the same way upstream does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.baseline_sqlite import BaselineStore
from benchmarks.config import RunConfig, alternate
from benchmarks.datasets import Dataset
from benchmarks.report import Figure, Target
from benchmarks.timing import median

__all__ = ["run"]

SCENARIO = "listing"


def run(cfg: RunConfig, dataset: Dataset, log: Callable[[str], None] = print) -> list[Figure]:
    """Time the three listings and the conversation replay on both sides."""
    from hermes_store import SessionDB

    baseline = BaselineStore(dataset.baseline_path)
    store = SessionDB(dataset.store_path)
    same = Target("ratio_max", 1.1)
    cases: list[tuple[str, str, Callable[[Any], Any], Target | None]] = [
        (
            SCENARIO,
            f"list_sessions_rich, {dataset.sessions:,} sessions",
            lambda db: db.list_sessions_rich(),
            same,
        ),
        (
            SCENARIO,
            f"list_sessions_rich source={cfg.filter_source}",
            lambda db: db.list_sessions_rich(source=cfg.filter_source),
            Target("ratio_below", 1.0),
        ),
        (
            SCENARIO,
            f"list_sessions_rich offset={cfg.listing_deep_offset:,}",
            lambda db: db.list_sessions_rich(offset=cfg.listing_deep_offset),
            same,
        ),
        (
            "conversation",
            f"get_messages_as_conversation ({dataset.spec.long_session_messages} messages)",
            lambda db: db.get_messages_as_conversation(dataset.long_session_id),
            None,
        ),
    ]
    figures: list[Figure] = []
    try:
        for scenario, label, call, target in cases:
            base_rows = call(baseline)
            store_rows = call(store)
            note = f"{len(store_rows)} rows"
            if scenario == SCENARIO:
                if [r["id"] for r in base_rows] != [r["id"] for r in store_rows]:
                    note += "; rows differ from baseline"
            elif base_rows != store_rows:
                note += "; messages differ from baseline"

            def run_base(call: Callable[[Any], Any] = call) -> object:
                return call(baseline)

            def run_store(call: Callable[[Any], Any] = call) -> object:
                return call(store)

            base_lat, store_lat = alternate(run_base, run_store, cfg.rounds, cfg.read_budget_s)
            figure = Figure(
                scenario,
                label,
                "s",
                median(base_lat),
                median(store_lat),
                target,
                note=note,
                detail={"calls_per_side": len(base_lat)},
            )
            log(
                f"  {label:<45} baseline {median(base_lat) * 1e3:8.2f} ms  store "
                f"{median(store_lat) * 1e3:8.2f} ms  ({note})"
            )
            figures.append(figure)
    finally:
        baseline.close()
        store.close()
    return figures
