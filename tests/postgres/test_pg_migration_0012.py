"""Revision 0012: PostgreSQL databases at 0011 gain the search objects, rows kept; SQLite is untouched.

Online through the real ``alembic`` command, offline as a ``--sql`` script run by the
server itself, and on SQLite (where the revision must change nothing but
``alembic_version``, so upstream Hermes keeps reading the file).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import psycopg
import sqlalchemy as sa

from hermes_store import SessionDB, create_engine

REPO = Path(__file__).resolve().parents[2]

ROWS = (
    "INSERT INTO sessions (id, source, started_at, message_count, tool_call_count, input_tokens, "
    "output_tokens) VALUES ('s', 'cli', 1.7e9, 2, 0, 0, 0)",
    "INSERT INTO messages (session_id, role, content, timestamp, tool_name) VALUES "
    "('s', 'user', 'kept through 0012 记忆', 1.7e9, NULL), ('s', 'tool', 'ok', 1.7e9 + 1, 'terminal')",
)


def _alembic(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "alembic", "-x", f"url={url}", *args],
        cwd=REPO, capture_output=True, text=True, check=False,
    )


def _at_0011_with_rows(url: str) -> None:
    result = _alembic(url, "upgrade", "0011")
    assert result.returncode == 0, result.stderr
    engine = create_engine(url)
    with engine.begin() as connection:
        for statement in ROWS:
            connection.exec_driver_sql(statement)
    engine.dispose()


def _objects(url: str) -> dict[str, object]:
    engine = create_engine(url)
    with engine.connect() as connection:
        facts = {
            "revision": connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar(),
            "schema_version": connection.exec_driver_sql("SELECT version FROM schema_version").scalar(),
            "indexes": set(
                connection.exec_driver_sql(
                    "SELECT indexname FROM pg_indexes WHERE tablename = 'messages'"
                ).scalars()
            ),
            "function": connection.exec_driver_sql(
                "SELECT count(*) FROM pg_proc WHERE proname = 'hermes_cjk_grams'"
            ).scalar(),
            "vectors": connection.exec_driver_sql(
                "SELECT count(*) FROM messages WHERE search_vector IS NOT NULL"
            ).scalar()
            if "search_vector" in {c["name"] for c in sa.inspect(connection).get_columns("messages")}
            else None,
            "messages": connection.exec_driver_sql("SELECT content FROM messages ORDER BY id")
            .scalars()
            .all(),
        }
    engine.dispose()
    return facts


NEW_INDEXES = {"idx_messages_search_vector", "idx_messages_cjk_grams", "idx_messages_session_id"}
KEPT = ["kept through 0012 记忆", "ok"]


def test_online_upgrade_from_0011_adds_the_objects_and_keeps_rows(pg_url: str) -> None:
    _at_0011_with_rows(pg_url)
    before = _objects(pg_url)
    assert before["revision"] == "0011" and not NEW_INDEXES & before["indexes"]  # type: ignore[operator]
    result = _alembic(pg_url, "upgrade", "head")
    assert result.returncode == 0, result.stderr
    after = _objects(pg_url)
    assert (after["revision"], after["schema_version"], after["function"]) == ("0012", 11, 1)
    assert after["indexes"] >= NEW_INDEXES and "idx_messages_fts" not in after["indexes"]  # type: ignore[operator]
    assert (after["messages"], after["vectors"]) == (KEPT, 2)
    db = SessionDB(url=pg_url)
    assert [h["id"] for h in db.search_messages("记忆")] == [1]
    assert [h["id"] for h in db.search_messages("terminal")] == [2]
    db.close()
    result = _alembic(pg_url, "downgrade", "0011")
    assert result.returncode == 0, result.stderr
    down = _objects(pg_url)
    assert (down["revision"], down["vectors"], down["function"]) == ("0011", None, 0)
    assert "idx_messages_fts" in down["indexes"] and not NEW_INDEXES & down["indexes"]  # type: ignore[operator]
    assert down["messages"] == KEPT


def test_offline_sql_script_upgrades_a_database_at_0011(pg_url: str) -> None:
    _at_0011_with_rows(pg_url)
    script = _alembic(pg_url, "upgrade", "0011:0012", "--sql")
    assert script.returncode == 0, script.stderr
    sql = script.stdout
    assert "GENERATED ALWAYS AS" in sql and "CREATE OR REPLACE FUNCTION hermes_cjk_grams" in sql
    assert "UPDATE alembic_version SET version_num='0012'" in sql
    assert "INSERT INTO schema_version (version) VALUES (11)" in sql
    # A DBA runs the script as it is; the server must accept it.
    dsn = sa.make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(sql.encode())
    after = _objects(pg_url)
    assert (after["revision"], after["schema_version"], after["messages"], after["vectors"]) == (
        "0012", 11, KEPT, 2,
    )
    assert after["indexes"] >= NEW_INDEXES  # type: ignore[operator]


def test_on_sqlite_0012_changes_nothing_but_alembic_version(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    url = f"sqlite:///{path}"
    assert _alembic(url, "upgrade", "0011").returncode == 0

    def schema() -> list[tuple[str, str]]:
        with closing(sqlite3.connect(path)) as connection:
            return connection.execute(
                "SELECT name, COALESCE(sql, '') FROM sqlite_master "
                "WHERE name <> 'alembic_version' ORDER BY name"
            ).fetchall()

    before = schema()
    assert _alembic(url, "upgrade", "head").returncode == 0
    assert schema() == before
    with closing(sqlite3.connect(path)) as connection:
        assert connection.execute("SELECT version FROM schema_version").fetchall() == [(11,)]
        assert connection.execute("SELECT version_num FROM alembic_version").fetchall() == [("0012",)]
    offline = _alembic(url, "upgrade", "0011:0012", "--sql")
    assert offline.returncode == 0, offline.stderr
    assert "search_vector" not in offline.stdout and "hermes_cjk_grams" not in offline.stdout
