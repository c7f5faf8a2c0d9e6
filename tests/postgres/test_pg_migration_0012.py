"""Revisions 0012–0013: PostgreSQL databases at 0011 gain the search objects, rows kept;
SQLite is untouched.

Online through the real ``alembic`` command, offline as a ``--sql`` script run by
``psql``, from a database the first (generated-column) 0012 built, with a message whose
vector would pass PostgreSQL's 1 MB limit, and on SQLite (where the revisions must change
nothing but ``alembic_version``, so upstream Hermes keeps reading the file).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
import sqlalchemy as sa
from pg_catalog import catalog, migrate_with_rows, run_psql
from support import migrate_to

from hermes_store import SessionDB, create_engine
from hermes_store.schema.legacy import HEAD_VERSION
from hermes_store.schema.revisions import history

HEAD = history().head

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
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )


def _at_0011_with_rows(url: str) -> None:
    migrate_with_rows(url, "0011", ROWS)


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


NEW_INDEXES = {"idx_messages_search_vector_bucket", "idx_messages_cjk_grams", "idx_messages_session_id"}
# 0020 drops 0012's expression index again (the stored grams of 0015 replaced it).
AT_HEAD = NEW_INDEXES - {"idx_messages_cjk_grams"}
KEPT = ["kept through 0012 记忆", "ok"]


def test_online_upgrade_from_0011_adds_the_objects_and_keeps_rows(pg_url: str) -> None:
    _at_0011_with_rows(pg_url)
    before = _objects(pg_url)
    assert before["revision"] == "0011" and not NEW_INDEXES & before["indexes"]  # type: ignore[operator]
    result = _alembic(pg_url, "upgrade", "head")
    assert result.returncode == 0, result.stderr
    after = _objects(pg_url)
    assert (after["revision"], after["schema_version"], after["function"]) == (HEAD, HEAD_VERSION, 1)
    assert after["indexes"] >= AT_HEAD and "idx_messages_fts" not in after["indexes"]  # type: ignore[operator]
    assert "idx_messages_cjk_grams" not in after["indexes"]  # type: ignore[operator]
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
    script = _alembic(pg_url, "upgrade", "0011:head", "--sql")
    assert script.returncode == 0, script.stderr
    sql = script.stdout
    assert "GENERATED ALWAYS AS" not in sql and "CREATE OR REPLACE FUNCTION hermes_cjk_grams" in sql
    assert "CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_search_vector" in sql
    assert f"UPDATE alembic_version SET version_num='{HEAD}'" in sql
    assert f"INSERT INTO schema_version (version) VALUES ({HEAD_VERSION})" in sql
    # A DBA runs the script as it is; the server must accept it.
    run_psql(pg_url, sql)
    after = _objects(pg_url)
    assert (after["revision"], after["schema_version"], after["messages"], after["vectors"]) == (
        HEAD,
        HEAD_VERSION,
        KEPT,
        2,
    )
    assert after["indexes"] >= AT_HEAD  # type: ignore[operator]


def test_on_sqlite_0012_to_0018_change_nothing_but_alembic_version(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    url = f"sqlite:///{path}"
    migrate_to(path, "0011")  # the starting point; the step tested is the command's below

    def schema() -> list[tuple[str, str]]:
        with closing(sqlite3.connect(path)) as connection:
            return connection.execute(
                "SELECT name, COALESCE(sql, '') FROM sqlite_master "
                "WHERE name <> 'alembic_version' ORDER BY name"
            ).fetchall()

    before = schema()
    assert _alembic(url, "upgrade", "0018").returncode == 0
    assert schema() == before
    with closing(sqlite3.connect(path)) as connection:
        assert connection.execute("SELECT version FROM schema_version").fetchall() == [(11,)]
        assert connection.execute("SELECT version_num FROM alembic_version").fetchall() == [("0018",)]
    offline = _alembic(url, "upgrade", "0011:head", "--sql")
    assert offline.returncode == 0, offline.stderr
    assert "search_vector" not in offline.stdout and "hermes_cjk_grams" not in offline.stdout


def _at_first_0012(url: str) -> None:
    """A database at 0012 as the first version of 0012 left it (a STORED generated column).

    That version is taken from git history (commit 13d1553), so the test reproduces what
    it really did rather than a copy of it.
    """
    _at_0011_with_rows(url)
    shown = subprocess.run(
        [
            "git",
            "-C",
            str(REPO),
            "show",
            f"{FIRST_0012_COMMIT}:migrations/versions/0012_postgresql_search_at_scale.py",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if shown.returncode != 0:
        pytest.skip(f"the first revision 0012 is not in this checkout's git history: {shown.stderr.strip()}")
    # Only its DDL constants are needed; its imports named the package layout of then.
    source = "\n".join(line for line in shown.stdout.splitlines() if not line.startswith("from hermes_store"))
    first_0012: dict[str, object] = {}
    exec(compile(source, "first_0012.py", "exec"), first_0012)
    engine = create_engine(url)
    with engine.begin() as connection:
        for statement in first_0012["POSTGRES_UPGRADE"]:  # type: ignore[attr-defined]
            connection.exec_driver_sql(statement)
        connection.exec_driver_sql("UPDATE alembic_version SET version_num = '0012'")
    engine.dispose()


FIRST_0012_COMMIT = "13d1553"


def test_a_database_the_first_0012_built_ends_at_the_same_head_schema(
    pg_url: str, second_pg_url: str
) -> None:
    _at_first_0012(pg_url)
    generated = [column[:5] for column in catalog(pg_url)["columns"]]
    assert ("messages", "search_vector", "tsvector", False, "s") in generated
    result = _alembic(pg_url, "upgrade", "head")
    assert result.returncode == 0, result.stderr
    _at_0011_with_rows(second_pg_url)
    migrate_to(second_pg_url, "head")  # the reference: a clean upgrade
    assert catalog(pg_url) == catalog(second_pg_url)
    db = SessionDB(url=pg_url)
    try:
        new = db.append_message("s", "user", "written after the conversion")
        assert [h["id"] for h in db.search_messages("conversion")] == [new]
        assert [h["id"] for h in db.search_messages("kept")] == [1]
    finally:
        db.close()


def test_a_message_whose_vector_would_pass_1_mb_is_stored_whole_and_found(pg_url: str) -> None:
    """150,000 distinct words: their full tsvector is over 1 MB (SQLSTATE 54000 before)."""
    from importlib import util

    spec = util.spec_from_file_location(
        "r0012", REPO / "migrations/versions/0012_postgresql_search_at_scale.py"
    )
    assert spec is not None and spec.loader is not None
    r0012 = util.module_from_spec(spec)
    spec.loader.exec_module(r0012)
    words = [f"w{index:06d}x" for index in range(150_000)]
    content = "firstword " + " ".join(words)
    assert len(content) > r0012.SEARCH_VECTOR_CHARS
    late = words[-1]  # beyond the first SEARCH_VECTOR_CHARS characters
    db = SessionDB(url=pg_url)
    try:
        db.create_session("big", "cli")
        message_id = db.append_message("big", "tool", content, tool_name="terminal")
        assert [m["content"] for m in db.get_messages("big")] == [content]
        assert [h["id"] for h in db.search_messages("firstword")] == [message_id]
        assert [h["id"] for h in db.search_messages(words[5_000])] == [message_id]
        # Words past the indexed prefix are not in the word index (docs/search.md).
        assert db.search_messages(late) == []
    finally:
        db.close()


@pytest.fixture
def second_pg_url(pg_admin_url: str) -> object:
    from pg_server import scratch_database

    with scratch_database(pg_admin_url, prefix="hermes_t") as url:
        yield url


def test_hermes_store_upgrade_shows_the_backfill_and_keeps_stdout_plain(pg_url: str) -> None:
    from click.testing import CliRunner

    from hermes_store.cli import cli

    _at_0011_with_rows(pg_url)
    runner = CliRunner(
        env={"HERMES_STORE_URL": None, "HERMES_HOME": None, "NO_COLOR": None, "COLUMNS": "120"}
    )
    # FORCE_COLOR makes rich treat stderr as a terminal.
    result = runner.invoke(cli, ["--url", pg_url, "upgrade"], env={"FORCE_COLOR": "1"})
    assert result.exit_code == 0, result.output
    assert "upgrade 0011 -> 0012" in result.stderr and "search vectors" in result.stderr
    assert "\x1b[" not in result.stdout and f"→ {HEAD} (head)" in result.stdout
    assert _objects(pg_url)["vectors"] == 2
