"""SQLite search: hermes_store against upstream Hermes itself and raw sqlite3, on one store file.

    python -m benchmarks.bench_search_upstream [--sessions 10000] [--rounds 10]
        [--upstream-commit HEAD_COMMIT] [--sort newest]

On SQLite the store must stay what upstream is: the same answers, the same schema, and
every search kind at most upstream Hermes' time on the same store. This benchmark checks
that directly:

1. The seeded workload (:mod:`benchmarks.datasets`) is generated into a source file and
   copied into a hermes_store SQLite file (``--sessions`` sessions of 20 messages; the
   default gives 200,000 messages), cached under ``--cache``.
2. Three sides open **that same file**: upstream Hermes' own ``SessionDB``
   (``hermes_state.py`` at ``--upstream-commit``, by default the schema-17 commit the
   drop-in follows, extracted from the mirror at run time by
   :mod:`benchmarks.upstream`), the plain-sqlite3 baseline
   (:mod:`benchmarks.baseline_sqlite`) and hermes_store's ``SessionDB``.
3. Every search kind (:func:`benchmarks.bench_pg_scale.query_sets`: words from
   "the" to rare ones, two words, phrases, prefixes, 3- and 2-character CJK, a word with a
   source filter, a Latin word beside a 2-character CJK term) is timed query by query,
   the sides in rotating order, each query ``--rounds`` times per side. ``--sort`` passes
   ``sort=`` to both stores (upstream's schema-17 ``SessionDB`` takes it); the plain-sqlite3
   baseline has no such parameter and is left out of that run.

Prints, per kind, each side's p50 / p99 and hermes_store's p50 over upstream's, and how many
queries gave upstream's hit set (upstream finds nothing for a Latin word beside short CJK
text, which hermes_store finds: that kind differs by design). The load average is printed before
and after: a figure taken on a loaded machine is not a result. Without the mirror the
upstream column is skipped with a message.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.bench_pg_scale import query_sets, source_file, sqlite_store
from benchmarks.bench_targets import load_average, open_store
from benchmarks.datasets import DatasetSpec, read_info
from benchmarks.timing import measure, median, percentile
from benchmarks.upstream import COMMIT, HEAD_COMMIT, upstream_folder
from hermes_store.search.plan import plan_search

SIDES = ("upstream", "sqlite3", "hermes_store")
FILTER_SOURCE = "telegram"


def search_kinds(seed: int, sort: str | None = None) -> dict[str, tuple[list[str], dict[str, Any]]]:
    """The search kinds: each kind's queries and the keyword arguments they run with
    (``sort`` among them when given)."""
    sets = query_sets(seed)
    common: dict[str, Any] = {} if sort is None else {"sort": sort}
    kinds: dict[str, tuple[list[str], dict[str, Any]]] = {
        kind: (found, dict(common)) for kind, found in sets.items()
    }
    kinds[f"word, source={FILTER_SOURCE}"] = (sets["word"], {**common, "source_filter": [FILTER_SOURCE]})
    return kinds


HIT_PAGE = 1_000
"""Hits compared per query. A query with fewer hits than this on both sides is compared
whole. One with a full page on either side is compared page for page when both sides rank
alike (word queries: bm25 on both); otherwise (substring queries: upstream ranks by bm25,
hermes_store newest first) only whether both filled the page, which says nothing about
which hits. Upstream builds each hit's context with queries of its own, so asking it for
every hit of "the" (most of the store) would take minutes."""


def _hit_ids(db: Any, query: str, options: dict[str, Any]) -> list[int]:
    return [int(hit["id"]) for hit in db.search_messages(query, limit=HIT_PAGE, **options)]


def same_hits(upstream: list[int], store: list[int], ranked_alike: bool) -> bool:
    """Whether hermes_store gave upstream's answer (see :data:`HIT_PAGE`)."""
    if len(upstream) < HIT_PAGE and len(store) < HIT_PAGE:
        return set(upstream) == set(store)
    return (upstream == store) if ranked_alike else len(upstream) == len(store)


def time_kind(
    stores: dict[str, Any], queries: list[str], options: dict[str, Any], rounds: int
) -> tuple[dict[str, list[float]], int]:
    """Latencies (s) per side over ``queries``, the sides' order rotating from query to query;
    and how many queries gave hermes_store upstream's hits (:func:`same_hits`; every one
    without upstream)."""
    samples: dict[str, list[float]] = {side: [] for side in stores}
    same = 0
    order = list(stores)
    for number, query in enumerate(queries):
        ranked_alike = plan_search(query).kind == "fts"
        if "upstream" in stores:
            upstream_hits = _hit_ids(stores["upstream"], query, options)
            store_hits = _hit_ids(stores["hermes_store"], query, options)
            same += same_hits(upstream_hits, store_hits, ranked_alike)
        else:
            same += 1
        rotated = order[number % len(order) :] + order[: number % len(order)]
        for side in rotated:
            db = stores[side]
            samples[side] += measure(lambda q=query, d=db: d.search_messages(q, **options), rounds, warmup=1)
    return samples, same


def _row(kind: str, samples: dict[str, list[float]], same: int, total: int) -> str:
    cells = []
    for side in SIDES:
        values = samples.get(side)
        cells.append(
            "-" if not values else f"{median(values) * 1e3:.2f} / {percentile(values, 99) * 1e3:.2f}"
        )
    ratio = "-"
    if samples.get("upstream"):
        ratio = f"{median(samples['hermes_store']) / median(samples['upstream']):.2f}×"
    return f"| {kind} | {' | '.join(cells)} | {ratio} | {same} of {total} |"


def run(
    store_path: Path,
    upstream: Path | None,
    seed: int,
    rounds: int,
    log: Callable[[str], None] = print,
    sort: str | None = None,
) -> list[str]:
    """Time every kind on the three sides over ``store_path``; returns the table's lines."""
    sides = [
        side
        for side in SIDES
        if (side != "upstream" or upstream is not None) and (side != "sqlite3" or sort is None)
    ]
    stores = {side: open_store(side, store_path, upstream) for side in sides}
    lines = [
        "| kind | upstream p50 / p99 ms | sqlite3 p50 / p99 ms | hermes_store p50 / p99 ms "
        "| hermes_store / upstream (p50) | upstream's hits |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    log(lines[0])
    log(lines[1])
    try:
        for kind, (queries, options) in search_kinds(seed, sort).items():
            samples, same = time_kind(stores, queries, options, rounds)
            line = _row(kind, samples, same, len(queries))
            log(line)
            lines.append(line)
    finally:
        for db in stores.values():
            db.close()
    return lines


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) the store, time every kind on every side, print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000, help="sessions of 20 messages")
    parser.add_argument("--rounds", type=int, default=10, help="timed calls per query and side")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--cache", type=Path, default=Path("bench-results"))
    parser.add_argument(
        "--upstream-commit",
        default=HEAD_COMMIT,
        help=f"upstream's commit (default: schema 17, {HEAD_COMMIT[:8]}; schema 11: {COMMIT[:8]})",
    )
    parser.add_argument("--sort", help="pass sort= to every search (newest, oldest)")
    args = parser.parse_args(argv)

    spec = DatasetSpec(args.sessions, 20, 500, args.seed)
    args.cache.mkdir(parents=True, exist_ok=True)
    source = source_file(spec, args.cache, print)
    total = int(read_info(source)["messages"])
    store_path = sqlite_store(source, total, args.cache, spec.key)
    upstream = upstream_folder(args.upstream_commit)
    print(
        f"{total:,} messages in {store_path}; upstream {args.upstream_commit[:8]}; sort={args.sort}; "
        f"load average before {load_average()}",
        flush=True,
    )
    try:
        print()
        run(store_path, upstream, args.seed, args.rounds, sort=args.sort)
    finally:
        if upstream is not None:
            shutil.rmtree(upstream, ignore_errors=True)
    print(f"load average after {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
