"""``search_messages`` on the bulk-loaded database (200,490 messages in a full run).

Seven query kinds, each guaranteed to match by :func:`benchmarks.workload.known_terms`: a single
word, two words, a quoted phrase, a prefix, a 3-character CJK term (trigram index), a
2-character CJK term (upstream's LIKE scan) and a word restricted to one source. Both stores
return upstream's result shape including the per-hit ``context`` query, with ``limit=20``.

Then the mixed kinds of ``docs/search.md`` (a Latin word beside a 2- or 3-character CJK term,
in either order): upstream finds nothing for them, so their target is not the baseline but
the store's own single-word p50 — at most twice it, because the trigram index narrows by the
Latin word before the short CJK term is checked.

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


MIXED_SLOWDOWN_MAX = 2.0
"""A mixed query may take at most this multiple of the store's single-word p50."""


def _mixed_queries(cfg: RunConfig) -> list[tuple[str, str]]:
    terms = known_terms(cfg.seed)
    return [
        ("mixed word + CJK 2", f"{terms.word} {terms.cjk2}"),
        ("mixed CJK 2 + word", f"{terms.cjk2} {terms.word}"),
        ("mixed CJK 3 + word", f"{terms.cjk3} {terms.word}"),
        ("mixed word + emoji", f"{terms.word} 🚀"),
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
    word_p50 = 0.0
    try:
        queries = _queries(cfg)
        queries += [(label, query, {}, Target("store_max", 0.0)) for label, query in _mixed_queries(cfg)]
        for label, query, kwargs, target in queries:
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
            if label == "single word":
                word_p50 = median(store_lat)
            if label.startswith("mixed"):
                target = Target("store_max", MIXED_SLOWDOWN_MAX * word_p50)
                note += f"; {median(store_lat) / word_p50:.2f}x the single-word p50" if word_p50 else ""
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
