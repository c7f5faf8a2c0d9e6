"""Revision 0014: PostgreSQL's stored vectors become unicode61 words, rows kept, online.

Through the real ``alembic`` command on a database at 0013 holding rows whose words
PostgreSQL's own parser cuts differently from FTS5 (``my.app_config.ts``, ``Café``):
after the upgrade every vector is unicode61's and word search finds what SQLite finds;
a writer that does not know about vectors (the previous release) stores unicode61
vectors too (the trigger); a SIGKILL in the middle of the rewrite is resumed after the
last committed batch, not from the start; the downgrade restores 0013's vectors and a
second upgrade redoes the rewrite.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from pg_catalog import (
    MIGRATOR,
    alembic,
    alembic_command,
    catalog,
    engine_for,
    migrate_with_rows,
    scalar,
    wait_for,
)
from support import REPO_ROOT, migrate_to

from hermes_store import SessionDB
from hermes_store.schema.migration_ops import PROGRESS_TABLE, batch_rows
from hermes_store.search.unicode61 import words

pytestmark = pytest.mark.postgres

BATCH_ROWS = batch_rows()
"""Rows per backfill batch in this run (tests/conftest.py sets 100)."""

ROWS = 2 * BATCH_ROWS
"""Two backfill batches: the kill test lets the first commit and blocks the second (every
revision after this one rewrites these rows too, so more rows cost every test seconds)."""
STEP = "0014 unicode61 search vectors"

FILL = (
    "INSERT INTO sessions (id, source, started_at, message_count, tool_call_count, input_tokens, "
    f"output_tokens) VALUES ('s', 'cli', 1.7e9, {ROWS}, 0, 0, 0)",
    "INSERT INTO messages (session_id, role, content, tool_name, timestamp) "
    "SELECT 's', 'user', 'Café ' || i || ' opens my.app_config.ts 记忆', "
    f"CASE WHEN mod(i, 3) = 0 THEN 'terminal' END, 1.7e9 + i FROM generate_series(1, {ROWS}) AS i",
)


def _at_0013(url: str) -> None:
    migrate_with_rows(url, "0013", FILL)


def _without_progress_table(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        key: [row for row in rows if not any(PROGRESS_TABLE in str(field) for field in row)]
        for key, rows in schema.items()
    }


def _vectors_are_unicode61(url: str) -> bool:
    engine = engine_for(url)
    with engine.connect() as connection:
        rows = connection.exec_driver_sql(
            "SELECT content, tool_name, tsvector_to_array(search_vector) FROM messages ORDER BY id"
        ).all()
    engine.dispose()
    return len(rows) >= ROWS and all(
        sorted(lexemes) == sorted(set(words(f"{content} {tool or ''} "))) for content, tool, lexemes in rows
    )


def test_upgrade_rewrites_every_vector_and_word_search_agrees_with_fts5(pg_url: str) -> None:
    _at_0013(pg_url)
    assert scalar(pg_url, "SELECT count(*) FROM messages WHERE search_vector @@ 'cafe'::tsquery") == 0
    result = alembic(pg_url, "upgrade", "head")
    assert result.returncode == 0, result.stderr
    assert _vectors_are_unicode61(pg_url)
    assert scalar(pg_url, f"SELECT next_id > {ROWS} FROM {PROGRESS_TABLE} WHERE step = '{STEP}'") is True
    db = SessionDB(url=pg_url)
    try:
        assert len(db.search_messages("cafe", limit=ROWS + 1)) == ROWS
        assert len(db.search_messages("app_config", limit=ROWS + 1)) == ROWS
        assert len(db.search_messages('"config ts"', limit=5)) == 5
        assert db.search_messages("café 17", limit=5)[0]["id"] == 17
    finally:
        db.close()
    # A writer that leaves the vector to the database (the previous release) gets unicode61's.
    engine = engine_for(pg_url)
    with engine.begin() as connection:
        connection.exec_driver_sql(
            "INSERT INTO messages (session_id, role, content, timestamp) "
            "VALUES ('s', 'user', 'Überraschung x.y', 1.8e9)"
        )
        lexemes = connection.exec_driver_sql(
            "SELECT tsvector_to_array(search_vector) FROM messages WHERE timestamp = 1.8e9"
        ).scalar()
    engine.dispose()
    assert sorted(lexemes) == ["uberraschung", "x", "y"]


def test_downgrade_restores_0013s_vectors_and_a_second_upgrade_redoes_the_rewrite(pg_url: str) -> None:
    _at_0013(pg_url)
    at_0013 = catalog(pg_url)
    before = scalar(pg_url, "SELECT string_agg(search_vector::text, '|' ORDER BY id) FROM messages")
    migrate_to(pg_url, "head")
    result = alembic(pg_url, "downgrade", "0013")
    assert result.returncode == 0, result.stderr
    assert scalar(pg_url, "SELECT string_agg(search_vector::text, '|' ORDER BY id) FROM messages") == before
    # The progress table stays (it records finished steps); everything else is 0013's.
    assert _without_progress_table(catalog(pg_url)) == at_0013
    assert alembic(pg_url, "upgrade", "head").returncode == 0
    assert _vectors_are_unicode61(pg_url)


def test_killed_during_the_rewrite_resumes_after_the_last_committed_batch(
    pg_url: str, tmp_path: Path
) -> None:
    _at_0013(pg_url)
    holder = engine_for(pg_url).connect()
    holder.exec_driver_sql(f"SELECT id FROM messages WHERE id = {ROWS} FOR UPDATE").all()
    with (tmp_path / "upgrade.log").open("wb") as stderr:
        upgrade = subprocess.Popen(
            alembic_command(pg_url, "upgrade", "0014"),
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    done_before_kill = ROWS - BATCH_ROWS + 1

    def progress() -> object:
        if scalar(pg_url, f"SELECT to_regclass('{PROGRESS_TABLE}')") is None:
            return None
        return scalar(pg_url, f"SELECT max(next_id) FROM {PROGRESS_TABLE}")

    wait_for(lambda: progress() == done_before_kill, "every batch but the blocked last one")
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
    holder.rollback()
    holder.close()
    assert scalar(pg_url, "SELECT version_num FROM alembic_version") == "0013"
    # 0014 alone: a later revision may write the same rows again.
    result = alembic(pg_url, "upgrade", "0014")
    assert result.returncode == 0, result.stderr
    assert _vectors_are_unicode61(pg_url)
    # The rerun started at the blocked batch: the first batch's rows were not written again.
    assert (
        scalar(pg_url, f"SELECT string_agg(xmin::text, ',') FROM messages WHERE id < {BATCH_ROWS}")
        == first_batch
    )
