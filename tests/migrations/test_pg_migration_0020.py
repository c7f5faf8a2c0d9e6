"""Revision 0020: revision 0012's expression index of CJK grams dropped; rows and hits kept.

Through the real ``alembic`` command on a database at 0019 holding English, CJK and tool
messages: no statement any search sends reads ``idx_messages_cjk_grams`` even while it
exists (their plans, with sequential scans off, name other indexes); the upgrade drops it
online and nothing else (the catalog is 0019's minus that index, ``hermes_cjk_grams``
stays for the trigger); every row, every hit and the previous release's use of the
database (scripts ending at 0019: the database reads as newer and is used as it is) are
kept; a run whose drop had already happened finishes; the downgrade restores 0019's
catalog. On SQLite the revision changes nothing but ``alembic_version``.
"""

from __future__ import annotations

import shutil
import sqlite3
import warnings
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from pg_catalog import alembic, catalog, engine_for, migrate_with_rows, scalar, search_hits

from hermes_store import SchemaBehindWarning, SessionDB
from hermes_store.db.engine import create_engine
from hermes_store.schema import migrate
from hermes_store.schema.legacy import NewerSchemaWarning
from hermes_store.schema.revisions import migrations_path

ROWS = 400
INDEX = "idx_messages_cjk_grams"
FILL = (
    "INSERT INTO sessions (id, source, started_at, message_count, tool_call_count, input_tokens, "
    f"output_tokens) VALUES ('s', 'cli', 1.7e9, {ROWS}, 0, 0, 0)",
    "INSERT INTO messages (id, session_id, role, content, tool_name, tool_calls, timestamp) "
    "SELECT i, 's', CASE WHEN mod(i, 4) = 3 THEN 'tool' ELSE 'user' END, CASE mod(i, 4) "
    "WHEN 0 THEN 'deploy the docker image ' || i "
    "WHEN 1 THEN '数据库 记忆 服务器 ' || i "
    "WHEN 2 THEN 'chung 那个 plain ' || i "
    "ELSE 'exit code ' || i END, "
    "CASE WHEN mod(i, 4) = 3 THEN 'terminal' END, "
    "CASE WHEN mod(i, 4) = 3 THEN '[{\"id\": \"c' || i || '\"}]' END, "
    f"1.7e9 + i FROM generate_series(1, {ROWS}) AS i",
    "SELECT setval('messages_id_seq', (SELECT max(id) FROM messages))",
)
QUERIES = ("docker", "数据库", "记忆", "记", "那个", "chung 那个", "terminal", '"exit code"')
ROWS_DIGEST = (
    "SELECT md5(string_agg(id || content || COALESCE(cjk_grams::text, '') || search_vector::text, "
    "'|' ORDER BY id)) FROM messages"
)
EXISTS = f"SELECT count(*) FROM pg_class WHERE relname = '{INDEX}'"

pytestmark = pytest.mark.postgres


def _hits(url: str) -> dict[str, list[int]]:
    return search_hits(url, QUERIES, limit=ROWS + 1)


def _indexes_read_by_search(url: str) -> set[str]:
    """Every ``idx_messages_*`` named in the plans of the statements the searches send,
    with sequential scans off (so any index that could serve a statement shows). An
    expression index serves only a statement holding its expression: none may."""
    seen: list[tuple[str, Any]] = []

    def note(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "WITH")):
            seen.append((statement, parameters))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SchemaBehindWarning)  # at 0019: behind head, runnable
        db = SessionDB(url=url)
    sa.event.listen(db.engine, "before_cursor_execute", note)
    try:
        for query in QUERIES:
            db.search_messages(query, limit=20)
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", note)
        db.close()
    assert len(seen) >= len(QUERIES)
    assert not [statement for statement, _ in seen if "hermes_cjk_grams(" in statement]
    named: set[str] = set()
    engine = engine_for(url)
    with engine.connect() as connection:
        cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
        cursor.execute("SET enable_seqscan = off")
        for statement, parameters in seen:
            cursor.execute("EXPLAIN " + statement, parameters or None)
            plan = " ".join(str(row[0]) for row in cursor.fetchall())
            named |= {word for word in plan.replace("(", " ").split() if word.startswith("idx_messages_")}
    engine.dispose()
    return named


def test_no_search_reads_the_index_and_the_upgrade_drops_it_keeping_rows_and_hits(pg_url: str) -> None:
    migrate_with_rows(pg_url, "0019", FILL)
    assert scalar(pg_url, EXISTS) == 1
    read = _indexes_read_by_search(pg_url)
    assert INDEX not in read
    at_0019, digest, hits = catalog(pg_url), scalar(pg_url, ROWS_DIGEST), _hits(pg_url)
    assert all(hits[query] for query in QUERIES)
    alembic(pg_url, "upgrade", "0020")
    assert scalar(pg_url, EXISTS) == 0
    after = catalog(pg_url)
    assert after["indexes"] == [row for row in at_0019["indexes"] if row[0] != INDEX]
    assert {key: value for key, value in after.items() if key not in ("indexes", "versions")} == {
        key: value for key, value in at_0019.items() if key not in ("indexes", "versions")
    }  # hermes_cjk_grams and the trigger that calls it stay
    assert after["versions"] == [("0020", 17)]
    assert scalar(pg_url, ROWS_DIGEST) == digest
    # The same hits; which of the remaining indexes the planner picks may change with the
    # statistics, so the plans are not compared.
    assert _hits(pg_url) == hits
    with SessionDB(url=pg_url) as db:
        written = db.append_message("s", "user", "新的 记忆 zebrafinch")
        assert written in {int(hit["id"]) for hit in db.search_messages("记忆", limit=ROWS + 1)}
    assert scalar(pg_url, f"SELECT cjk_grams IS NOT NULL FROM messages WHERE id = {written}") is True


def test_the_previous_release_uses_a_database_at_0020_as_it_is(pg_url: str, tmp_path: Path) -> None:
    migrate_with_rows(pg_url, "0019", FILL)
    hits = _hits(pg_url)
    alembic(pg_url, "upgrade", "0020")
    # The previous release's scripts end at 0019: to it the database is newer, used as it is.
    previous = tmp_path / "migrations"
    shutil.copytree(migrations_path(), previous, ignore=shutil.ignore_patterns("__pycache__", "0020_*"))
    engine = create_engine(pg_url)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            state = migrate.ensure_schema(engine, script_location=str(previous))
    finally:
        engine.dispose()
    assert state.revision == "0020" and state.newer
    assert scalar(pg_url, EXISTS) == 0
    assert [w for w in caught if issubclass(w.category, NewerSchemaWarning)]
    assert scalar(pg_url, "SELECT version_num FROM alembic_version") == "0020"  # never stamped down
    assert _hits(pg_url) == hits


def test_a_run_whose_drop_had_happened_finishes_and_the_downgrade_restores_0019(pg_url: str) -> None:
    migrate_with_rows(pg_url, "0019", FILL)
    at_0019, digest, hits = catalog(pg_url), scalar(pg_url, ROWS_DIGEST), _hits(pg_url)
    engine = engine_for(pg_url)
    with engine.connect() as connection:  # as a run killed after its drop leaves the database
        connection.exec_driver_sql(f"DROP INDEX {INDEX}")
        connection.commit()
    engine.dispose()
    alembic(pg_url, "upgrade", "0020")
    assert scalar(pg_url, EXISTS) == 0
    assert scalar(pg_url, "SELECT version_num FROM alembic_version") == "0020"
    alembic(pg_url, "downgrade", "0019")
    assert catalog(pg_url) == at_0019
    assert scalar(pg_url, ROWS_DIGEST) == digest
    assert _hits(pg_url) == hits
    alembic(pg_url, "upgrade", "0020")  # the whole drop this time
    assert scalar(pg_url, EXISTS) == 0
    assert _hits(pg_url) == hits


def test_on_sqlite_the_revision_changes_nothing_but_the_revision(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    migrate.upgrade(path, "0019")

    def objects() -> list[tuple[str, str, str | None]]:
        with sqlite3.connect(path) as connection:
            return connection.execute(
                "SELECT type, name, sql FROM sqlite_master ORDER BY type, name"
            ).fetchall()

    before = objects()
    migrate.upgrade(path, "0020")
    assert objects() == before
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT version_num FROM alembic_version").fetchall() == [("0020",)]
    migrate.downgrade(path, "0019")
    assert objects() == before
