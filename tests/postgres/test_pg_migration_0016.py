"""Revision 0016: a CJK message's stored grams also hold its ASCII trigrams; rows kept, online.

Through the real ``alembic`` command on a database at 0015 holding CJK, Latin and mixed
messages: after the upgrade every CJK message holds exactly ``hermes_search_grams`` of its
indexed text (its CJK grams, then the lower-cased trigrams of its ASCII runs) and every
other message NULL; a writer that does not know the column (the previous release) gets it
filled by the trigger; searches for a Latin word beside a CJK term find the same messages
before and after, and so does the previous release's gram condition (CJK grams only); a
rerun leaves the messages already refilled alone; the downgrade restores 0015's grams and
schema exactly, every row kept.
"""

from __future__ import annotations

import pytest
from pg_catalog import alembic, catalog, engine_for, migrate_with_rows, scalar, search_hits
from support import migrate_to

from hermes_store import SessionDB
from hermes_store.schema.migration_ops import batch_rows
from hermes_store.search.postgres.grams import MAX_LIFTED_TRIGRAMS, ascii_trigrams

pytestmark = pytest.mark.postgres

BATCH_ROWS = batch_rows()
"""Rows per backfill batch in this run (tests/conftest.py sets 100)."""

ROWS = 2 * BATCH_ROWS
"""Two backfill batches: the rerun test refills the first and leaves the second to the rerun
(0017 and 0018 rewrite these rows too, so more rows cost every test seconds)."""
CJK_EVERY = 3

FILL = (
    "INSERT INTO sessions (id, source, started_at, message_count, tool_call_count, input_tokens, "
    f"output_tokens) VALUES ('s', 'cli', 1.7e9, {ROWS}, 0, 0, 0)",
    # CJK messages mix upper- and lower-case Latin words and numbers; the others are Latin only.
    "INSERT INTO messages (session_id, role, content, tool_calls, timestamp) "
    f"SELECT 's', 'user', CASE WHEN mod(i, {CJK_EVERY}) = 0 "
    "THEN CASE WHEN mod(i, 2) = 0 THEN 'THEM 记忆 ' ELSE 'themselves 服务 ' END || i "
    "ELSE 'plain them ' || i END, "
    'CASE WHEN mod(i, 7) = 0 THEN \'[{"function": {"name": "Terminal"}}]\' END, '
    f"1.7e9 + i FROM generate_series(1, {ROWS}) AS i",
)
INDEXED = "COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, '')"
WRONG_GRAMS = (
    "SELECT count(*) FROM messages "
    f"WHERE cjk_grams IS DISTINCT FROM NULLIF(hermes_search_grams({INDEXED}), '{{}}'::text[])"
)
WRONG_0015_GRAMS = (
    "SELECT count(*) FROM messages "
    f"WHERE cjk_grams IS DISTINCT FROM NULLIF(hermes_cjk_grams({INDEXED}), '{{}}'::text[])"
)
ROWS_DIGEST = "SELECT md5(string_agg(content || coalesce(tool_calls, ''), '|' ORDER BY id)) FROM messages"
QUERIES = ("them 记忆", "THEM 服务", "selves 服务", "termin 记忆", "3 记忆", "plain 记忆", "记忆", "12 服务")


def _at_0015(url: str) -> None:
    migrate_with_rows(url, "0015", FILL)


def _hits(url: str) -> dict[str, list[int]]:
    return search_hits(url, QUERIES, limit=ROWS + 1)


def test_upgrade_adds_the_ascii_trigrams_and_every_search_keeps_its_hits(pg_url: str) -> None:
    _at_0015(pg_url)
    before = _hits(pg_url)
    assert len(before["记忆"]) == ROWS // (2 * CJK_EVERY)
    assert before["plain 记忆"] == []
    result = alembic(pg_url, "upgrade", "head")
    assert result.returncode == 0, result.stderr
    assert scalar(pg_url, WRONG_GRAMS) == 0
    assert scalar(pg_url, "SELECT count(*) FROM messages WHERE cjk_grams IS NOT NULL") == ROWS // CJK_EVERY
    assert _hits(pg_url) == before
    engine = engine_for(pg_url)
    with engine.connect() as connection:
        grams = dict(
            connection.exec_driver_sql("SELECT id, cjk_grams FROM messages WHERE id IN (6, 21, 1, 2)").all()
        )
    engine.dispose()
    assert grams[1] is None and grams[2] is None
    assert set(grams[6]) == {"记", "忆", "记忆", "the", "hem"}
    # id 21: CJK, a seven: 'themselves 服务 21' and its tool call's JSON.
    assert set(grams[21]) >= {"服务", "the", "ves", "fun", "ter", "nal"}
    assert "Ter" not in grams[21]
    for query in ("them", "themselves", "Terminal"):
        assert set(ascii_trigrams(query)) <= set(grams[21])


def test_the_previous_releases_writes_and_gram_conditions_keep_working(pg_url: str) -> None:
    _at_0015(pg_url)
    migrate_to(pg_url, "head")
    engine = engine_for(pg_url)
    with engine.begin() as connection:
        # The previous release never names the column: the trigger fills it.
        connection.exec_driver_sql(
            "INSERT INTO messages (session_id, role, content, timestamp) "
            "VALUES ('s', 'user', 'ABC 新的', 1.8e9)"
        )
        connection.exec_driver_sql("UPDATE messages SET content = 'Docker 编辑' WHERE id = 1")
        connection.exec_driver_sql("UPDATE messages SET content = 'latin only' WHERE id = 6")
        stored = dict(
            connection.exec_driver_sql(
                "SELECT content, cjk_grams FROM messages WHERE timestamp = 1.8e9 OR id IN (1, 6)"
            ).all()
        )
        # 0015's gram condition (CJK grams only) finds what it found: arrays only grew.
        found = connection.exec_driver_sql(
            "SELECT count(*) FROM messages WHERE cjk_grams @> ARRAY['记忆'] AND strpos(content, '记忆') > 0"
        ).scalar()
    engine.dispose()
    assert {content: sorted(grams or []) for content, grams in stored.items()} == {
        "ABC 新的": ["abc", "新", "新的", "的"],
        "Docker 编辑": ["cke", "doc", "ker", "ock", "编", "编辑", "辑"],
        "latin only": [],
    }
    assert found == ROWS // (2 * CJK_EVERY) - 1  # id 6 no longer holds 记忆
    assert scalar(pg_url, WRONG_GRAMS) == 0
    db = SessionDB(url=pg_url)
    try:
        assert [hit["id"] for hit in db.search_messages("docker 编辑")] == [1]
        assert [hit["id"] for hit in db.search_messages("abc 新的")] == [ROWS + 1]
    finally:
        db.close()


def test_a_rerun_leaves_the_refilled_messages_alone(pg_url: str) -> None:
    _at_0015(pg_url)
    migrate_to(pg_url, "head")
    # As a killed run leaves it: the function and the trigger in place, the first batch's
    # CJK messages refilled, the later ones still holding 0015's grams, the revision 0015.
    engine = engine_for(pg_url)
    with engine.begin() as connection:
        connection.exec_driver_sql(
            f"UPDATE messages SET cjk_grams = NULLIF(hermes_cjk_grams({INDEXED}), '{{}}'::text[]) "
            f"WHERE id >= {BATCH_ROWS} AND cjk_grams IS NOT NULL"
        )
        connection.exec_driver_sql("UPDATE alembic_version SET version_num = '0015'")
    engine.dispose()
    assert scalar(pg_url, WRONG_GRAMS) > 0
    first_batch = scalar(pg_url, f"SELECT string_agg(xmin::text, ',') FROM messages WHERE id < {BATCH_ROWS}")
    assert alembic(pg_url, "upgrade", "head").returncode == 0
    assert scalar(pg_url, WRONG_GRAMS) == 0
    assert (
        scalar(pg_url, f"SELECT string_agg(xmin::text, ',') FROM messages WHERE id < {BATCH_ROWS}")
        == first_batch
    )


def test_downgrade_restores_0015s_grams_and_schema(pg_url: str) -> None:
    _at_0015(pg_url)
    at_0015 = catalog(pg_url)
    rows = scalar(pg_url, ROWS_DIGEST)
    migrate_to(pg_url, "head")
    assert scalar(pg_url, WRONG_0015_GRAMS) > 0
    result = alembic(pg_url, "downgrade", "0015")
    assert result.returncode == 0, result.stderr
    assert catalog(pg_url) == at_0015
    assert scalar(pg_url, ROWS_DIGEST) == rows
    assert scalar(pg_url, WRONG_0015_GRAMS) == 0
    assert alembic(pg_url, "upgrade", "head").returncode == 0
    assert scalar(pg_url, WRONG_GRAMS) == 0


TRIGRAM_TEXTS = (
    "THEM 记忆",
    "my.app_Co 记忆",
    "达成100完成率",
    "café Ünïcode 记",
    "a_b-c 12 记 x9Y",
    "KELVIN 忆",
)


def test_the_stored_trigrams_are_the_ones_a_query_asks_for(pg_head_url: str) -> None:
    """``hermes_search_grams`` (stored) and :func:`ascii_trigrams` (asked for) are one
    definition written twice, in SQL and in Python: on a text short enough not to be
    thinned, the trigrams beside the CJK grams are exactly the query side's. (One database
    at head for every text: the functions are what is compared, not the migration.)"""
    engine = engine_for(pg_head_url)
    with engine.connect() as connection:
        rows = {
            text: connection.exec_driver_sql(
                "SELECT hermes_search_grams(%(t)s), hermes_cjk_grams(%(t)s)", {"t": text}
            ).one()
            for text in TRIGRAM_TEXTS
        }
    engine.dispose()
    for text, (stored, cjk) in rows.items():
        assert len(ascii_trigrams(text)) < MAX_LIFTED_TRIGRAMS, text
        assert sorted(set(stored) - set(cjk)) == sorted(ascii_trigrams(text)), text
