"""PostgreSQL at a million messages, beside SQLite at 200,000.

    python -m benchmarks.bench_pg_scale --pg-url postgresql+psycopg://postgres@127.0.0.1/test

1. The seeded workload (:mod:`benchmarks.workload`: Zipf prose, ~10 % CJK, ~30 % tool
   traffic, five sources, lineage) is generated once into a source file
   (:mod:`benchmarks.datasets`, cached under ``bench-results/``): 50,000 sessions of 20
   messages plus one of 500 — 1,000,479 messages.
2. A fresh PostgreSQL database (created and dropped here) is filled by ``COPY``
   (:mod:`benchmarks.pg_bulk_load`) and brought to head over its rows.
3. A SQLite store gets the first 200,000 messages of the same source (same rows, same
   ids) by ``INSERT … SELECT`` (its FTS5 triggers index them).
4. Both are timed through ``SessionDB``: every search kind, the session listing,
   lineage, appends; then ``copy`` of the PostgreSQL store into a new SQLite file.

Targets (PostgreSQL at 1M): every search kind p50 ≤ 30 ms and p99 ≤ 100 ms,
``list_sessions_rich`` at offset 1,000 ≤ 5 ms, append p50 ≤ 2 ms. Each search kind is
timed over a set of queries of that kind (:func:`query_sets`: words from the most common
to rare ones, so the p99 covers the costly ones), each query ``--rounds`` times.
Prints one table; ``--json`` also writes the figures. The machine is what it is:
figures taken on a shared, loaded machine say so in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from benchmarks.bench_targets import load_average
from benchmarks.datasets import DatasetSpec, build_source, bulk_copy, create_empty, read_info, remove_db
from benchmarks.pg_bulk_load import load_postgres
from benchmarks.timing import measure, median, percentile
from benchmarks.workload import known_terms

SEARCH_P50_MS = 30.0
SEARCH_P99_MS = 100.0
LISTING_P50_MS = 5.0
APPEND_P50_MS = 2.0
WORD_RANKS = (0, 3, 10, 30, 60, 100, 150, 250, 400, 600, 1000, 1500, 2500, 4000)
"""Vocabulary ranks of the words timed per kind: from "the" to rare pseudo-words."""


def query_sets(seed: int) -> dict[str, list[str]]:
    """The queries timed for every search kind: the known terms plus words of every frequency."""
    from benchmarks.workload import _corpus

    corpus = _corpus(seed)
    terms = known_terms(seed)
    vocab = corpus.vocab
    words = [vocab[rank] for rank in WORD_RANKS if rank < len(vocab)]
    stems = list(dict.fromkeys(word[:4] for word in words if len(word) >= 5))
    cjk2 = [token for token in corpus.cjk_tokens if len(token) == 2][:8]
    cjk3 = [token for token in corpus.cjk_tokens if len(token) == 3][:8]
    return {
        "word": [terms.word, *words],
        "two_words": [terms.two_words, *(f"{a} {b}" for a, b in zip(words, words[3:], strict=False))],
        "phrase": [terms.phrase, *(f'"{a} {b}"' for a, b in itertools.pairwise(words))],
        "prefix": [terms.prefix, *(f"{stem}*" for stem in stems)],
        "cjk3": [terms.cjk3, *cjk3],
        "cjk2": [terms.cjk2, *cjk2],
        "latin word + cjk2": [
            f"{word} {token}" for word, token in zip(words, [terms.cjk2, *cjk2] * 3, strict=False)
        ],
    }


def _measure_set(call: Callable[[str], object], queries: list[str], rounds: int) -> list[float]:
    samples: list[float] = []
    for query in queries:
        samples += measure(lambda q=query: call(q), max(1, rounds // len(queries)) + 2, warmup=1)
    return samples


def source_file(spec: DatasetSpec, cache: Path, log: Callable[[str], None]) -> Path:
    """The generated source file of ``spec`` under ``cache``, built the first time."""
    path = cache / f"source-{spec.key}.db"
    if not path.exists():
        log(f"generating {spec.message_total:,} messages -> {path}")
        started = time.perf_counter()
        build_source(spec, path)
        log(f"  {time.perf_counter() - started:.0f} s")
    return path


def sqlite_store(source: Path, messages: int, cache: Path, key: str) -> Path:
    """A hermes_store SQLite file holding the first ``messages`` messages of ``source``
    (and their sessions), built under ``cache`` the first time."""
    path = cache / f"store-{key}-first{messages}.db"
    if not path.exists():
        partial = path.with_name(path.name + ".partial")
        remove_db(partial)
        create_empty("store", partial)
        bulk_copy(partial, source, max_message_id=messages)
        path.unlink(missing_ok=True)
        partial.rename(path)
        remove_db(partial)
    return path


def _lineage_ids(db: Any) -> tuple[str, str]:
    """A child session (for ancestors) and a root with children (for descendants)."""
    with db.engine.connect() as connection:
        child, parent = connection.exec_driver_sql(
            "SELECT id, parent_session_id FROM sessions WHERE parent_session_id IS NOT NULL "
            "ORDER BY id LIMIT 1"
        ).one()
    return str(child), str(parent)


def time_store(
    db: Any, seed: int, rounds: int, appends: int, kinds: set[str] | None = None
) -> dict[str, list[float]]:
    """Latencies (s) of every figure on one store (only those search kinds, when ``kinds``)."""
    samples: dict[str, list[float]] = {}
    sets = query_sets(seed)
    for kind, queries in sets.items():
        if kinds is None or kind in kinds:
            samples[f"search {kind}"] = _measure_set(db.search_messages, queries, rounds)
    if kinds is not None:
        return samples
    samples["search word, source=telegram"] = _measure_set(
        lambda q: db.search_messages(q, source_filter=["telegram"]), sets["word"], rounds
    )
    samples["list_sessions_rich"] = measure(db.list_sessions_rich, rounds, warmup=2)
    samples["list_sessions_rich offset=1000"] = measure(
        lambda: db.list_sessions_rich(offset=1000), rounds, warmup=2
    )
    samples["list_sessions_rich source=cli"] = measure(
        lambda: db.list_sessions_rich(source="cli"), rounds, warmup=2
    )
    child, parent = _lineage_ids(db)
    samples["lineage (ancestors + descendants + resume)"] = measure(
        lambda: (db.get_ancestors(child), db.get_descendants(parent), db.resolve_resume_session_id(parent)),
        rounds,
        warmup=2,
    )
    # The appends become the store's newest messages; a store kept for --reuse must not
    # gather them run after run (they would fill the newest window every search reads first).
    db.delete_session("bench-append")
    db.create_session("bench-append", "cli")
    try:
        samples["append_message"] = measure(
            lambda: db.append_message("bench-append", "user", "benchmark append " * 20), appends, warmup=5
        )
    finally:
        db.delete_session("bench-append")
    return samples


def _summary(samples: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {
        name: {"p50_ms": median(values) * 1e3, "p99_ms": percentile(values, 99) * 1e3}
        for name, values in samples.items()
    }


def _verdict(name: str, pg: dict[str, float], lite: dict[str, float] | None) -> str:
    checks: list[bool] = []
    if name.startswith("search"):
        checks += [pg["p50_ms"] <= SEARCH_P50_MS, pg["p99_ms"] <= SEARCH_P99_MS]
    elif name in ("list_sessions_rich", "list_sessions_rich offset=1000"):
        checks.append(pg["p50_ms"] <= LISTING_P50_MS)
    elif name == "append_message":
        checks.append(pg["p50_ms"] <= APPEND_P50_MS)
    if not checks:
        return ""
    return "ok" if all(checks) else "MISSED"


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) the data, time both stores, print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pg-url", required=True, help="an admin URL of a PostgreSQL server")
    parser.add_argument("--sessions", type=int, default=50_000)
    parser.add_argument("--messages", type=int, default=20, help="messages per session")
    parser.add_argument("--sqlite-messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--cache", type=Path, default=Path("bench-results"))
    parser.add_argument("--keep", action="store_true", help="keep the PostgreSQL database")
    parser.add_argument("--reuse", metavar="DATABASE", help="time a database kept by --keep, no loading")
    parser.add_argument("--skip-copy", action="store_true", help="do not time hermes-store copy")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--upgrade-from", help="load into a store at this revision (e.g. 0011) and time the upgrade"
    )
    parser.add_argument(
        "--kinds",
        help="time only these search kinds on PostgreSQL (comma-separated, e.g. phrase,word), no SQLite",
    )
    args = parser.parse_args(argv)

    from hermes_store import SessionDB
    from hermes_store.admin.transfer import copy_store

    def log(line: str) -> None:
        print(line, flush=True)

    spec = DatasetSpec(args.sessions, args.messages, 500, args.seed)
    args.cache.mkdir(parents=True, exist_ok=True)
    source = source_file(spec, args.cache, log)
    total = int(read_info(source)["messages"])
    lite_path = sqlite_store(source, args.sqlite_messages, args.cache, spec.key)

    admin = sa.create_engine(args.pg_url, isolation_level="AUTOCOMMIT")
    name = args.reuse or f"hermes_scale_{uuid.uuid4().hex[:8]}"
    if not args.reuse:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
            # Index builds of an upgrade run faster with more memory (benchmark database only).
            connection.exec_driver_sql(f"ALTER DATABASE \"{name}\" SET maintenance_work_mem = '256MB'")
    url = sa.make_url(args.pg_url).set(database=name).render_as_string(hide_password=False)
    report: dict[str, Any] = {"messages": total, "sqlite_messages": args.sqlite_messages, "load_s": {}}
    try:
        if not args.reuse:
            log(f"loading {total:,} messages into PostgreSQL database {name}")
            started = time.perf_counter()
            report["load_s"] = load_postgres(url, source, log, upgrade_from=args.upgrade_from)
            report["load_total_s"] = time.perf_counter() - started
            log(f"  loaded in {report['load_total_s']:.0f} s")

        kinds = set(args.kinds.split(",")) if args.kinds else None
        log(f"timing at load average {load_average()}")
        pg = SessionDB(url=url)
        pg_figures = _summary(time_store(pg, args.seed, args.rounds, args.appends, kinds))
        pg.close()
        lite_figures: dict[str, dict[str, float]] = {}
        if kinds is None:
            lite = SessionDB(lite_path)
            lite_figures = _summary(time_store(lite, args.seed, args.rounds, args.appends))
            lite.close()
        log(f"timed; load average {load_average()}")
        report["postgresql"] = pg_figures
        report["sqlite"] = lite_figures
        _print(report, total, args.sqlite_messages)
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))

        if not args.skip_copy:
            with tempfile.TemporaryDirectory() as directory:
                target = Path(directory) / "copy.db"
                started = time.perf_counter()
                copy_store(_engine(url), _engine(str(target)))
                report["copy_s"] = time.perf_counter() - started
    finally:
        if not (args.keep or args.reuse):
            with admin.connect() as connection:
                connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()

    if "copy_s" in report:
        log(f"hermes-store copy PostgreSQL -> SQLite ({total:,} messages): {report['copy_s']:.0f} s")
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))
    return 0


def _engine(target: str) -> sa.Engine:
    from hermes_store import create_engine

    return create_engine(target)


def _print(report: dict[str, Any], total: int, lite_total: int) -> None:
    pg_figures = report["postgresql"]
    lite_figures = report["sqlite"]
    print()
    print(
        f"| figure | PostgreSQL {total:,} p50 / p99 (ms) | SQLite {lite_total:,} p50 / p99 (ms) "
        "| p50 ratio | target |"
    )
    print("| --- | ---: | ---: | ---: | --- |")
    for figure, pg in pg_figures.items():
        lite = lite_figures.get(figure)
        ratio = f"{pg['p50_ms'] / lite['p50_ms']:.2f}x" if lite and lite["p50_ms"] else "-"
        lite_text = f"{lite['p50_ms']:.2f} / {lite['p99_ms']:.2f}" if lite else "-"
        print(
            f"| {figure} | {pg['p50_ms']:.2f} / {pg['p99_ms']:.2f} | {lite_text} | {ratio} "
            f"| {_verdict(figure, pg, lite)} |"
        )
    for phase, seconds in report["load_s"].items():
        print(f"load: {phase}: {seconds:.1f} s")
    if "load_total_s" in report:
        print(f"load total: {report['load_total_s']:.0f} s")


if __name__ == "__main__":
    raise SystemExit(main())
