"""Revision 0015: each message's CJK grams stored in ``messages.cjk_grams``, rows kept, online.

Through the real ``alembic`` command on a database at 0014 holding CJK and Latin
messages: after the upgrade every CJK message holds exactly ``hermes_cjk_grams`` of its
indexed text and every other message NULL; a writer that does not know the column (the
previous release) gets it filled by the trigger, on insert and on an edit of the text;
short CJK search finds the same messages before and after; a SIGKILL in the middle of the
backfill is resumed at the first message still missing its grams, not from the start;
the downgrade restores 0014's schema exactly, every row kept.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pg_catalog import (
    MIGRATOR,
    alembic,
    alembic_command,
    catalog,
    engine_for,
    hold_update_of,
    migrate_with_rows,
    scalar,
    search_hits,
    update_is_held,
    wait_for,
)
from support import REPO_ROOT, migrate_to

from hermes_store.schema.migration_ops import batch_rows

pytestmark = pytest.mark.postgres

BATCH_ROWS = batch_rows()
"""Rows per backfill batch in this run (tests/conftest.py sets 100)."""

ROWS = 2 * BATCH_ROWS
"""Two backfill batches: the kill test lets the first commit and blocks the second (every
revision after this one rewrites these rows too, so more rows cost every test seconds)."""
CJK_EVERY = 3  # every third message holds CJK text

FILL = (
    "INSERT INTO sessions (id, source, started_at, message_count, tool_call_count, input_tokens, "
    f"output_tokens) VALUES ('s', 'cli', 1.7e9, {ROWS}, 0, 0, 0)",
    "INSERT INTO messages (session_id, role, content, tool_name, timestamp) "
    f"SELECT 's', 'user', CASE WHEN mod(i, {CJK_EVERY}) = 0 THEN '记忆 ' || i || ' 服务' "
    "ELSE 'plain ' || i END, "
    f"CASE WHEN mod(i, 5) = 0 THEN '工具' END, 1.7e9 + i FROM generate_series(1, {ROWS}) AS i",
)
INDEXED = "COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, '')"
WRONG_GRAMS = (
    "SELECT count(*) FROM messages "
    f"WHERE cjk_grams IS DISTINCT FROM NULLIF(hermes_cjk_grams({INDEXED}), '{{}}'::text[])"
)

ROWS_DIGEST = "SELECT md5(string_agg(content || coalesce(tool_name, ''), '|' ORDER BY id)) FROM messages"


def _at_0014(url: str) -> None:
    migrate_with_rows(url, "0014", FILL)


def _hit_ids(url: str, query: str) -> list[int]:
    return search_hits(url, [query], limit=ROWS + 1)[query]


def test_upgrade_stores_the_grams_of_every_cjk_message_and_the_trigger_keeps_them(pg_url: str) -> None:
    _at_0014(pg_url)
    before = {query: _hit_ids(pg_url, query) for query in ("记忆", "忆", "工具", "plain 记忆", "服务 7")}
    assert len(before["记忆"]) == ROWS // CJK_EVERY
    result = alembic(pg_url, "upgrade", "0015")
    assert result.returncode == 0, result.stderr
    assert scalar(pg_url, WRONG_GRAMS) == 0
    assert scalar(pg_url, "SELECT count(*) FROM messages WHERE cjk_grams IS NOT NULL") == len(
        set(before["记忆"]) | set(before["工具"])
    )
    assert (
        scalar(
            pg_url,
            "SELECT indisvalid FROM pg_index WHERE indexrelid = 'idx_messages_stored_cjk_grams'::regclass",
        )
        is True
    )
    assert {query: _hit_ids(pg_url, query) for query in before} == before
    # A writer that leaves the column to the database (the previous release) gets it filled.
    engine = engine_for(pg_url)
    with engine.begin() as connection:
        connection.exec_driver_sql(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('s', 'user', '新的', 1.8e9)"
        )
        connection.exec_driver_sql("UPDATE messages SET content = '编辑' WHERE id = 3")
        connection.exec_driver_sql("UPDATE messages SET content = 'latin now' WHERE id = 6")
        stored = dict(
            connection.exec_driver_sql(
                "SELECT content, cjk_grams FROM messages WHERE timestamp = 1.8e9 OR id IN (3, 6)"
            ).all()
        )
    engine.dispose()
    assert {content: sorted(grams or []) for content, grams in stored.items()} == {
        "新的": ["新", "新的", "的"],
        "编辑": ["编", "编辑", "辑"],
        "latin now": [],
    }
    assert scalar(pg_url, WRONG_GRAMS) == 0
    assert _hit_ids(pg_url, "编辑") == [3]


def test_downgrade_restores_0014s_schema_and_a_second_upgrade_refills(pg_url: str) -> None:
    _at_0014(pg_url)
    at_0014 = catalog(pg_url)
    rows = scalar(pg_url, ROWS_DIGEST)
    migrate_to(pg_url, "head")
    result = alembic(pg_url, "downgrade", "0014")
    assert result.returncode == 0, result.stderr
    assert catalog(pg_url) == at_0014
    assert scalar(pg_url, ROWS_DIGEST) == rows
    assert alembic(pg_url, "upgrade", "0015").returncode == 0
    assert scalar(pg_url, WRONG_GRAMS) == 0


def test_killed_during_the_backfill_resumes_at_the_first_message_missing_its_grams(
    pg_url: str, tmp_path: Path
) -> None:
    _at_0014(pg_url)
    held = ROWS - ROWS % CJK_EVERY  # the last CJK message, in the last batch
    release = hold_update_of(pg_url, held)
    with (tmp_path / "upgrade.log").open("wb") as stderr:
        upgrade = subprocess.Popen(
            alembic_command(pg_url, "upgrade", "0015"),
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    # Batches of ids start at the first message missing its grams (id 3).
    last_batch = CJK_EVERY + (held - CJK_EVERY) // BATCH_ROWS * BATCH_ROWS
    wait_for(lambda: update_is_held(pg_url), "the backfill to wait inside its last batch")
    done = scalar(pg_url, f"SELECT count(*) FROM messages WHERE cjk_grams IS NOT NULL AND id < {last_batch}")
    holding_cjk = f"hermes_cjk_grams({INDEXED}) <> '{{}}'"
    assert done == scalar(pg_url, f"SELECT count(*) FROM messages WHERE id < {last_batch} AND {holding_cjk}")
    first_batch = scalar(pg_url, f"SELECT string_agg(xmin::text, ',') FROM messages WHERE id < {BATCH_ROWS}")
    upgrade.kill()
    upgrade.wait(timeout=30)
    wait_for(
        lambda: (
            scalar(
                pg_url,
                f"SELECT count(*) FROM pg_stat_activity WHERE application_name = '{MIGRATOR}' "
                "AND datname = current_database()",
            )
            == 0
        ),
        "the killed migrator's session to end",
    )
    release()
    assert scalar(pg_url, "SELECT version_num FROM alembic_version") == "0014"
    assert scalar(pg_url, WRONG_GRAMS) > 0
    result = alembic(pg_url, "upgrade", "0015")
    assert result.returncode == 0, result.stderr
    assert scalar(pg_url, WRONG_GRAMS) == 0
    # The rerun started at the first message still missing its grams: the first batch's
    # rows were not written again.
    assert (
        scalar(pg_url, f"SELECT string_agg(xmin::text, ',') FROM messages WHERE id < {BATCH_ROWS}")
        == first_batch
    )
