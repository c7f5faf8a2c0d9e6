"""The store's search against the oracle of ``docs/search.md``, on SQLite and PostgreSQL.

One seeded corpus (3,000+ messages: the query classes of the doc, code, tool-call JSON,
near misses) is loaded once per backend per module; 200 queries are generated per class,
and an evenly spread sample of each class (100 per word class, 50 per substring class;
the same queries on both backends) runs through the search layer, its hit sets compared
with the brute-force oracle in ``_oracle.py``. Substring classes must agree exactly
(recall and precision 100 %) on both backends. Word classes must agree exactly on SQLite,
whose unicode61 tokenizer the oracle describes, and PostgreSQL must return SQLite's hit
set — which, SQLite agreeing exactly, is the oracle's — for at least 99 % of each word
class's queries (``docs/search.md`` lists what may differ). The stored texts are the
same on both backends, so the oracle's hits are too.

Set ``HERMES_ORACLE_TABLE=<file>`` to run every generated query and write the per-class
table in Markdown.
"""

from __future__ import annotations

import os
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from _oracle import (
    SUBSTRING_CLASSES,
    WORD_CLASSES,
    Query,
    build_corpus,
    expected_hits,
    generate_queries,
    indexed_text,
    words,
)
from sqlalchemy import orm

from hermes_store import SessionDB
from hermes_store.search.engine import SearchFilters, find_hits
from hermes_store.search.order import SearchOrder
from hermes_store.search.plan import plan_search

LIMIT = 100_000
SAMPLE_PER_CLASS = 100
"""Queries run per word class in CI (all 200 when writing the table): one difference is 1 %."""
SUBSTRING_SAMPLE_PER_CLASS = 50
"""Queries run per substring class in CI: every one must agree on both backends, so no
share needs a hundred queries to mean 1 %; each query costs a search on each backend."""
SAME_HITS_SHARE = 0.99
"""The share of each word class's queries that must give PostgreSQL the hit set SQLite gives."""

Key = tuple[str, int]


class Loaded:
    """A store holding the corpus, with the oracle's view of every stored message."""

    def __init__(self, db: SessionDB) -> None:
        self.db = db
        for number, session in enumerate(build_corpus()):
            session_id = f"s{number:04d}"
            db.create_session(session_id, "cli" if number % 3 else "telegram")
            db.replace_messages(session_id, session)
        with db.engine.connect() as connection:
            rows = connection.execute(
                sa.text(
                    "SELECT id, session_id, content, tool_name, tool_calls, role FROM messages ORDER BY id"
                )
            ).all()
        ordinal: dict[str, int] = defaultdict(int)
        self.key_of: dict[int, Key] = {}
        self.texts: dict[Key, str] = {}
        self.roles: dict[Key, str] = {}
        for row_id, session_id, content, tool_name, tool_calls, role in rows:
            key = (session_id, ordinal[session_id])
            ordinal[session_id] += 1
            self.key_of[row_id] = key
            self.texts[key] = indexed_text(content, tool_name, tool_calls)
            self.roles[key] = role
        self.tokens = {key: words(text) for key, text in self.texts.items()}

    def hits(self, query: str) -> set[Key]:
        """The keys of every message the search layer finds for ``query``.

        The planner and the backend's query run as ``search_messages`` runs them; only the
        context of each hit (two neighbours, tested elsewhere) is left out, to keep the
        thousands of hits of a one-character query cheap.
        """
        with orm.Session(self.db.engine) as session:
            found = find_hits(session, plan_search(query), SearchFilters(), LIMIT, 0)
        return {self.key_of[hit["id"]] for hit in found}

    def hits_in_time_order(self, query: str, order: SearchOrder) -> list[tuple[Key, float]]:
        """Every hit of ``query`` in time ``order``, as ``(key, timestamp)``."""
        with orm.Session(self.db.engine) as session:
            found = find_hits(session, plan_search(query), SearchFilters(), LIMIT, 0, order)
        return [(self.key_of[hit["id"]], float(hit["timestamp"])) for hit in found]


_QUERIES: list[Query] | None = None
_EXPECTED: dict[tuple[str, str], set[Key]] = {}


def expected_for(store: Loaded, query: Query) -> set[Key]:
    """The oracle's hits for ``query`` (computed once: the corpus is the same on every backend)."""
    key = (query.cls, query.text)
    if key not in _EXPECTED:
        _EXPECTED[key] = expected_hits(query, store.texts, store.tokens)
    return _EXPECTED[key]


def sampled_queries(store: Loaded) -> list[Query]:
    """The queries a test run evaluates: every ``n``-th of each class, ``SAMPLE_PER_CLASS`` in
    all (``SUBSTRING_SAMPLE_PER_CLASS`` for a substring class).

    Spread over the whole generated list, so each class's sample holds every shape its
    generator makes; every query when writing the table.
    """
    queries = queries_for(store)
    if os.environ.get("HERMES_ORACLE_TABLE"):
        return queries
    by_class: dict[str, list[Query]] = defaultdict(list)
    for query in queries:
        by_class[query.cls].append(query)
    sample: list[Query] = []
    for cls, members in by_class.items():
        size = SUBSTRING_SAMPLE_PER_CLASS if cls in SUBSTRING_CLASSES else SAMPLE_PER_CLASS
        step = max(1, len(members) // size)
        sample.extend(members[::step][:size])
    return sample


def queries_for(store: Loaded) -> list[Query]:
    """The generated queries (the same on every backend: the corpus text is the same)."""
    global _QUERIES
    if _QUERIES is None:
        _QUERIES = generate_queries(sorted(store.texts.values()))
    return _QUERIES


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    db = SessionDB(tmp_path_factory.mktemp("oracle") / "state.db")
    try:
        yield Loaded(db)
    finally:
        db.close()


@pytest.fixture(scope="module")
def pg_store(pg_admin_url: str) -> Iterator[Loaded]:
    admin_url = sa.make_url(pg_admin_url)
    name = f"hermes_oracle_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    db = SessionDB(admin_url.set(database=name).render_as_string(hide_password=False))
    try:
        yield Loaded(db)
    finally:
        db.close()
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


Stats = dict[str, dict[str, float]]
_RESULTS: dict[str, tuple[Stats, dict[str, set[Key]]]] = {}


def evaluate(backend: str, store: Loaded) -> tuple[Stats, dict[str, set[Key]]]:
    """Run the sample once per backend; per class: queries, recall, precision, mismatches."""
    if backend in _RESULTS:
        return _RESULTS[backend]
    tallies: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    found_by_query: dict[str, set[Key]] = {}
    for query in sampled_queries(store):
        expected = expected_for(store, query)
        found = store.hits(query.text)
        found_by_query[query.text] = found
        tally = tallies[query.cls]
        tally["queries"] += 1
        tally["expected"] += len(expected)
        tally["found"] += len(found)
        tally["right"] += len(expected & found)
        tally["mismatched"] += expected != found
    stats = {
        cls: {
            "queries": tally["queries"],
            "recall": tally["right"] / tally["expected"] if tally["expected"] else 1.0,
            "precision": tally["right"] / tally["found"] if tally["found"] else 1.0,
            "mismatched": tally["mismatched"],
            "hits": tally["found"],
        }
        for cls, tally in tallies.items()
    }
    _RESULTS[backend] = (stats, found_by_query)
    _write_table()
    return stats, found_by_query


def _write_table() -> None:
    target = os.environ.get("HERMES_ORACLE_TABLE")
    if not target:
        return
    lines = [
        "| class | semantics | queries | backend | hits | recall | precision | queries not exact |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for cls in (*WORD_CLASSES, *SUBSTRING_CLASSES):
        for backend, (stats, _) in sorted(_RESULTS.items(), reverse=True):
            row = stats[cls]
            semantics = "substring" if cls in SUBSTRING_CLASSES else "word"
            lines.append(
                f"| {cls} | {semantics} | {row['queries']:.0f} | {backend} | {row['hits']:.0f} | "
                f"{row['recall']:.2%} | {row['precision']:.2%} | {row['mismatched']:.0f} |"
            )
    Path(target).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _mismatches(store: Loaded, classes: tuple[str, ...], found: dict[str, set[Key]]) -> list[str]:
    out = []
    for query in sampled_queries(store):
        if query.cls not in classes:
            continue
        expected = expected_for(store, query)
        if found[query.text] != expected:
            missing = sorted(expected - found[query.text])[:2]
            extra = sorted(found[query.text] - expected)[:2]
            out.append(
                f"{query.cls} {query.text!r}: missing {[store.texts[k][:60] for k in missing]} "
                f"extra {[store.texts[k][:60] for k in extra]}"
            )
    return out


def test_sqlite_gives_the_oracle_hits_in_every_class(sqlite_store: Loaded) -> None:
    # One test per backend, so the corpus is loaded and every query run once per backend
    # (xdist would spread several tests over workers, each loading and evaluating again).
    queries = queries_for(sqlite_store)
    assert len(sqlite_store.texts) >= 3000
    for cls in (*WORD_CLASSES, *SUBSTRING_CLASSES):
        assert sum(1 for query in queries if query.cls == cls) >= 200
    # Most queries find something, so agreeing on "nothing" is not what passes.
    sample = sampled_queries(sqlite_store)
    with_hits = sum(1 for query in sample if expected_for(sqlite_store, query))
    assert with_hits > 0.8 * len(sample)
    stats, found = evaluate("sqlite", sqlite_store)
    assert _mismatches(sqlite_store, (*WORD_CLASSES, *SUBSTRING_CLASSES), found) == []
    for cls in (*WORD_CLASSES, *SUBSTRING_CLASSES):
        assert stats[cls]["recall"] == stats[cls]["precision"] == 1.0, cls
    assert _filtered_agreement(sqlite_store) == []
    assert _time_order_agreement(sqlite_store) == []


@pytest.mark.postgres
def test_postgresql_gives_sqlites_hits(pg_store: Loaded) -> None:
    # SQLite returns exactly the oracle's hits for every query (the test above), so a
    # PostgreSQL hit set equal to the oracle's is the one SQLite returns: comparing with
    # the oracle needs no SQLite store in this worker. Substring classes must agree on
    # every query; word classes (PostgreSQL's vectors hold unicode61's words from revision
    # 0014, its queries read with FTS5's grammar) on 99 % of each class's queries at least
    # (docs/search.md lists what may differ).
    stats, found = evaluate("postgresql", pg_store)
    assert _mismatches(pg_store, SUBSTRING_CLASSES, found) == []
    for cls in SUBSTRING_CLASSES:
        assert stats[cls]["recall"] == stats[cls]["precision"] == 1.0, cls
    assert sum(stats[cls]["hits"] for cls in SUBSTRING_CLASSES) > 0
    for cls in WORD_CLASSES:
        ran = [query for query in sampled_queries(pg_store) if query.cls == cls]
        differing = [q.text for q in ran if found[q.text] != expected_for(pg_store, q)]
        assert len(ran) >= SAMPLE_PER_CLASS
        assert len(ran) - len(differing) >= SAME_HITS_SHARE * len(ran), (cls, differing[:5])
        assert sum(len(found[query.text]) for query in ran) > 0
    assert _filtered_agreement(pg_store) == []
    assert _time_order_agreement(pg_store) == []


def _time_order_agreement(store: Loaded) -> list[str]:
    """In time order a query finds what it finds in relevance order (which the tests
    above hold to the oracle), once each, sorted by timestamp: every tenth query of the
    sample, of both semantics, newest and oldest first."""
    wrong = []
    sample = sampled_queries(store)[::10]
    for query in sample:
        by_relevance = store.hits(query.text)
        for order in ("newest", "oldest"):
            hits = store.hits_in_time_order(query.text, order)
            times = [timestamp for _, timestamp in hits]
            keys = [key for key, _ in hits]
            if times != sorted(times, reverse=order == "newest") or sorted(keys) != sorted(by_relevance):
                wrong.append(f"{order} {query.text!r}")
    assert len(sample) >= 100
    return wrong


def _filtered_agreement(store: Loaded) -> list[str]:
    """Through the public ``search_messages``: filters narrow the oracle's hits exactly."""
    telegram = {key for key in store.texts if int(key[0][1:]) % 3 == 0}
    roles = store.roles
    wrong = []
    sample = [query for query in sampled_queries(store) if query.cls in SUBSTRING_CLASSES][::3]
    for query in sample:
        expected = expected_for(store, query)
        hits = store.db.search_messages(
            query.text, source_filter=["telegram"], role_filter=["user"], limit=LIMIT
        )
        found = {store.key_of[hit["id"]] for hit in hits}
        wanted = {key for key in expected if key in telegram and roles[key] == "user"}
        if found != wanted:
            wrong.append(query.text)
        excluded = store.db.search_messages(query.text, exclude_sources=["telegram"], limit=LIMIT)
        if {store.key_of[hit["id"]] for hit in excluded} != expected - telegram:
            wrong.append(query.text)
    assert len(sample) >= 90
    return wrong
