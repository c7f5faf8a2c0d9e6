"""The revisions on PostgreSQL: same tables, indexes, version bookkeeping; no drift."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from hermes_store import create_engine, current_revision, downgrade, upgrade
from hermes_store.schema.legacy import HEAD_VERSION
from hermes_store.schema.revisions import history

REPO = Path(__file__).resolve().parents[2]


def _alembic(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "alembic", "-x", f"url={url}", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )


def test_upgrade_creates_upstream_tables_and_search_indexes(pg_url: str) -> None:
    upgrade(pg_url)
    inspector = sa.inspect(create_engine(pg_url))
    assert {
        "sessions",
        "messages",
        "state_meta",
        "schema_version",
        "alembic_version",
        "compression_locks",
        "telegram_dm_topic_mode",
        "telegram_dm_topic_bindings",
    } <= set(inspector.get_table_names())
    assert len(inspector.get_columns("sessions")) == 41
    # upstream's first 15 columns, revision 0012's trigger-kept tsvector and 0015's CJK
    # grams, then the 4 of upstream's schema 17 (revision 0019)
    assert [c["name"] for c in inspector.get_columns("messages")][15:] == [
        "search_vector",
        "cjk_grams",
        "platform_message_id",
        "observed",
        "active",
        "compacted",
    ]
    (binding_key,) = inspector.get_foreign_keys("telegram_dm_topic_bindings")
    assert (binding_key["referred_table"], binding_key["options"].get("ondelete")) == ("sessions", "CASCADE")
    types = {c["name"]: c["type"] for c in inspector.get_columns("sessions")}
    assert isinstance(types["started_at"], sa.Double | sa.DOUBLE_PRECISION)
    indexes = {ix["name"]: ix for ix in inspector.get_indexes("sessions")}
    assert indexes["idx_sessions_title_unique"]["unique"]
    message_indexes = {ix["name"] for ix in inspector.get_indexes("messages")}
    assert {
        "idx_messages_session",
        "idx_messages_search_vector_bucket",
        "idx_messages_trgm",
        "idx_messages_cjk_grams_bucket",
        "idx_messages_session_id",
        "idx_messages_word_pairs_bucket",
    } <= message_indexes
    assert "idx_messages_fts" not in message_indexes  # replaced by the stored vector's index
    assert "idx_messages_cjk_grams" not in message_indexes  # read by no runnable release (0020)
    # replaced by revision 0018's indexes keyed by id bucket too
    assert (
        not {"idx_messages_search_vector", "idx_messages_stored_cjk_grams", "idx_messages_word_pairs"}
        & message_indexes
    )
    with create_engine(pg_url).connect() as connection:
        versions = connection.exec_driver_sql("SELECT version FROM schema_version").scalars().all()
        assert versions == [HEAD_VERSION]
        assert connection.exec_driver_sql("SELECT key, value FROM state_meta").all() == [
            ("telegram_dm_topic_schema_version", "2")
        ]
        assert (
            connection.exec_driver_sql(
                "SELECT count(*) FROM pg_extension WHERE extname IN ('pg_trgm', 'btree_gin')"
            ).scalar()
            == 2
        )
    assert current_revision(pg_url) == history().head


def test_epoch_seconds_keep_microseconds(pg_head_url: str) -> None:
    from hermes_store import SessionDB

    db = SessionDB(url=pg_head_url)
    db.create_session("s", "cli")
    db._conn.execute("UPDATE sessions SET started_at = 1796044235.319171 WHERE id = 's'")  # type: ignore[union-attr]
    assert db.get_session("s")["started_at"] == 1796044235.319171  # type: ignore[index]
    db.close()


def test_step_down_and_up_keeps_rows_and_schema_version(pg_url: str) -> None:
    from hermes_store import SessionDB

    db = SessionDB(url=pg_url)
    db.create_session("s", "cli")
    db.append_message("s", "user", "kept through every step")
    db.close()
    engine = create_engine(pg_url)
    for version in range(11, 0, -1):
        downgrade(pg_url, f"{version:04d}")
        with engine.connect() as connection:
            assert connection.exec_driver_sql("SELECT version FROM schema_version").scalar() == version
            assert connection.exec_driver_sql("SELECT count(*) FROM messages").scalar() == 1
    upgrade(pg_url)
    with engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT version FROM schema_version").scalar() == HEAD_VERSION
        assert connection.exec_driver_sql("SELECT count(*) FROM messages").scalar() == 1
    engine.dispose()


def test_alembic_check_reports_no_drift_on_postgresql(pg_url: str) -> None:
    upgrade(pg_url)
    result = _alembic(pg_url, "check")
    assert result.returncode == 0, result.stderr
    assert "No new upgrade operations detected" in result.stdout + result.stderr
