"""``search_messages`` on the bulk-loaded database (200,490 messages in a full run).

Seven query kinds, each guaranteed to match by :func:`benchmarks.workload.known_terms`: a single
word, two words, a quoted phrase, a prefix, a 3-character CJK term (trigram index), a
2-character CJK term (upstream's LIKE scan) and a word restricted to one source. Both stores
return upstream's result shape including the per-hit ``context`` query, with ``limit=20``.

Before timing, the hit ids of the two sides are compared; a difference is reported in the
figure's note (the data is identical, so it would mean a behavioural difference).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.baseline_sqlite import BaselineStore
from benchmarks.config import RunConfig, alternate
from benchmarks.datasets import Dataset
from benchmarks.report import Figure, Target
from benchmarks.timing import median
from benchmarks.workload import known_terms

__all__ = ["run"]

SCENARIO = "search"


def _queries(cfg: RunConfig) -> list[tuple[str, str, dict[str, Any], Target]]:
    terms = known_terms(cfg.seed)
    same = Target("ratio_max", 1.1)
    faster = Target("ratio_below", 1.0)
    return [
        ("single word", terms.word, {}, same),
        ("two words", terms.two_words, {}, same),
        ("phrase", terms.phrase, {}, same),
        ("prefix", terms.prefix, {}, same),
        ("CJK 3 chars (trigram)", terms.cjk3, {}, same),
        ("CJK 2 chars (LIKE scan)", terms.cjk2, {}, faster),
        (f"word, source={cfg.filter_source}", terms.word, {"source_filter": [cfg.filter_source]}, same),
    ]


def _call(db: Any, query: str, kwargs: dict[str, Any]) -> Callable[[], list[dict[str, Any]]]:
    def search() -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = db.search_messages(query, **kwargs)
        return result

    return search


def run(cfg: RunConfig, dataset: Dataset, log: Callable[[str], None] = print) -> list[Figure]:
    """Time every query kind on both sides; one figure per kind (median latency)."""
    from hermes_store import SessionDB

    figures: list[Figure] = []
    baseline = BaselineStore(dataset.baseline_path)
    store = SessionDB(dataset.store_path)
    try:
        for label, query, kwargs, target in _queries(cfg):
            base_fn = _call(baseline, query, kwargs)
            store_fn = _call(store, query, kwargs)
            base_ids = [hit["id"] for hit in base_fn()]
            store_ids = [hit["id"] for hit in store_fn()]
            note = f"{len(store_ids)} hits"
            if not store_ids:
                note += "; NO HITS"
            if base_ids != store_ids:
                note += (
                    "; hit order differs"
                    if sorted(base_ids) == sorted(store_ids)
                    else f"; hits differ (baseline {len(base_ids)})"
                )
            base_lat, store_lat = alternate(base_fn, store_fn, cfg.rounds, cfg.read_budget_s)
            figure = Figure(
                SCENARIO,
                f"{label}: {query}",
                "s",
                median(base_lat),
                median(store_lat),
                target,
                note=note,
                detail={"calls_per_side": len(base_lat)},
            )
            log(
                f"  {figure.name:<45} baseline {median(base_lat) * 1e3:8.2f} ms  store "
                f"{median(store_lat) * 1e3:8.2f} ms  ({note})"
            )
            figures.append(figure)
    finally:
        baseline.close()
        store.close()
    return figures
