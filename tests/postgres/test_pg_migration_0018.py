"""Revision 0018: the search indexes keyed by id bucket too; rows and hits kept, online.

Through the real ``alembic`` command on a database at 0017 whose message ids are spread
over eighteen buckets of 262,144 (ids 7,919 apart), so every search reads several
buckets: the upgrade builds the three bucketed indexes (valid) and drops the three they
replace; every query finds the same messages before and after, and the same as a brute
force over the texts; the previous release's form of a lookup (no bucket named) is still
served by an index; a message written afterwards is indexed and found; a run stopped
half-way finishes; the downgrade restores 0017's catalog and keeps every row and hit.
"""

from __future__ import annotations

import re

import pytest
from pg_catalog import alembic, catalog, engine_for, migrate_with_rows, scalar, search_hits

from hermes_store import SessionDB
from hermes_store.search.id_buckets import ID_BUCKET_BITS

pytestmark = pytest.mark.postgres

ROWS = 600
SPACING = 7919

FILL = (
    "INSERT INTO sessions (id, source, started_at, message_count, tool_call_count, input_tokens, "
    f"output_tokens) VALUES ('s', 'cli', 1.7e9, {ROWS}, 0, 0, 0)",
    "INSERT INTO messages (id, session_id, role, content, timestamp) "
    f"SELECT i * {SPACING}, 's', 'user', CASE mod(i, 6) "
    "WHEN 0 THEN 'does does it work ' || i "
    "WHEN 1 THEN 'any does 记忆 ' || i "
    "WHEN 2 THEN 'the chung 那个 plain ' || i "
    "WHEN 3 THEN 'plain chu hun ung 那个 ' || i "
    "WHEN 4 THEN CASE WHEN mod(i, 25) = 4 THEN 'zork 记忆 rare ' || i ELSE 'plain 记 忆 ' || i END "
    "ELSE 'work it, any ' || i || ' does' END, "
    f"1.7e9 + i FROM generate_series(1, {ROWS}) AS i",
    "SELECT setval('messages_id_seq', (SELECT max(id) FROM messages))",
)
QUERIES = (
    "plain",
    "does it",
    '"any does"',
    '"does does"',
    "记忆",
    "chung 那个",
    "zork 记忆",
    "rare",
    "plai*",
)
ROWS_DIGEST = "SELECT md5(string_agg(id || content, '|' ORDER BY id)) FROM messages"
NEW = ("idx_messages_search_vector_bucket", "idx_messages_cjk_grams_bucket", "idx_messages_word_pairs_bucket")
OLD = ("idx_messages_search_vector", "idx_messages_stored_cjk_grams", "idx_messages_word_pairs")
VALID = "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = '{}'"


def _brute_force(number: int) -> dict[str, bool]:
    kind = number % 6
    content = {
        0: f"does does it work {number}",
        1: f"any does 记忆 {number}",
        2: f"the chung 那个 plain {number}",
        3: f"plain chu hun ung 那个 {number}",
        4: f"zork 记忆 rare {number}" if number % 25 == 4 else f"plain 记 忆 {number}",
        5: f"work it, any {number} does",
    }[kind]
    words = re.findall(r"\w+", content)
    return {
        "plain": "plain" in words,
        "does it": {"does", "it"} <= set(words),
        '"any does"': "any does" in content,
        '"does does"': "does does" in content,
        "记忆": "记忆" in content,
        "chung 那个": "chung" in content and "那个" in content,
        "zork 记忆": "zork" in content and "记忆" in content,
        "rare": "rare" in words,
        "plai*": any(word.startswith("plai") for word in words),
    }


def _hits(url: str) -> dict[str, list[int]]:
    return search_hits(url, QUERIES, limit=ROWS + 1)


def test_upgrade_keys_the_indexes_by_bucket_and_every_query_keeps_its_hits(pg_url: str) -> None:
    migrate_with_rows(pg_url, "0017", FILL)
    assert ROWS * SPACING >> ID_BUCKET_BITS == 18
    before = _hits(pg_url)
    expected = {
        query: sorted(i * SPACING for i in range(1, ROWS + 1) if _brute_force(i)[query]) for query in QUERIES
    }
    assert before == expected
    result = alembic(pg_url, "upgrade", "0018")
    assert result.returncode == 0, result.stderr
    assert all(scalar(pg_url, VALID.format(name)) is True for name in NEW)
    assert all(scalar(pg_url, VALID.format(name)) is None for name in OLD)
    # The bucket the indexes key is the one the search names (search/id_buckets.py).
    for name in NEW:
        definition = scalar(pg_url, f"SELECT pg_get_indexdef('{name}'::regclass)")
        assert f"(id >> {ID_BUCKET_BITS})" in str(definition)
    assert _hits(pg_url) == expected
    # Every page of a newest-first search, at the store's real bucket width (this release
    # serves from revision 0019).
    assert alembic(pg_url, "upgrade", "head").returncode == 0
    db = SessionDB(url=pg_url)
    try:
        for query in ("记忆", "chung 那个", "zork 记忆"):
            pages = [db.search_messages(query, limit=7, offset=offset) for offset in range(0, 70, 7)]
            listed = [int(hit["id"]) for page in pages for hit in page]
            assert listed == sorted(expected[query], reverse=True)[:70]
        db.create_session("later", "cli")
        written = db.append_message("later", "user", "then any does it 那个 chung")
        assert written in {int(hit["id"]) for hit in db.search_messages('"any does it"', limit=ROWS)}
        assert written == int(db.search_messages("chung 那个", limit=1)[0]["id"])
    finally:
        db.close()


def test_the_previous_release_lookups_still_use_an_index(pg_url: str) -> None:
    migrate_with_rows(pg_url, "0017", FILL)
    alembic(pg_url, "upgrade", "0018")
    engine = engine_for(pg_url)
    with engine.connect() as connection:
        connection.exec_driver_sql("SET enable_seqscan = off")
        plans = {
            condition: "\n".join(
                row[0]
                for row in connection.exec_driver_sql(f"EXPLAIN SELECT id FROM messages m WHERE {condition}")
            )
            for condition in (
                "m.search_vector @@ 'plain'::tsquery",
                "m.cjk_grams @> ARRAY['记忆']",
                "hermes_word_pairs(m.search_vector) @> ARRAY[hashtext('any does')]",
            )
        }
    engine.dispose()
    for (condition, plan), name in zip(plans.items(), NEW, strict=True):
        assert name in plan, (condition, plan)


def test_a_run_stopped_half_way_finishes_and_the_downgrade_restores_0017(pg_url: str) -> None:
    migrate_with_rows(pg_url, "0017", FILL)
    at_0017 = catalog(pg_url)
    digest = scalar(pg_url, ROWS_DIGEST)
    hits = _hits(pg_url)
    # As a killed upgrade leaves it: one new index built, one old index already gone.
    engine = engine_for(pg_url)
    with engine.connect() as connection:
        connection.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS btree_gin")
        connection.exec_driver_sql(
            "CREATE INDEX idx_messages_search_vector_bucket ON messages USING gin (search_vector, (id >> 18))"
        )
        connection.exec_driver_sql("DROP INDEX idx_messages_stored_cjk_grams")
        connection.commit()
    engine.dispose()
    alembic(pg_url, "upgrade", "0018")
    assert all(scalar(pg_url, VALID.format(name)) is True for name in NEW)
    assert all(scalar(pg_url, VALID.format(name)) is None for name in OLD)
    assert _hits(pg_url) == hits
    result = alembic(pg_url, "downgrade", "0017")
    assert result.returncode == 0, result.stderr
    assert catalog(pg_url) == at_0017
    assert scalar(pg_url, ROWS_DIGEST) == digest
    assert _hits(pg_url) == hits
