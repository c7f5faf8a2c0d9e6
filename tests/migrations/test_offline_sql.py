"""Offline migrations are runnable.

``alembic -x url=… upgrade head --sql`` from an empty database runs cleanly under
``sqlite3 -bail`` and ``psql -v ON_ERROR_STOP=1`` and leaves exactly the schema an online
upgrade leaves; so does the SQL between two revisions, up and down.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pg_server
import pytest
import sqlalchemy as sa
from pg_server import scratch_database
from support import migrate_to, run_alembic

from hermes_store.schema import migrate

SQLITE3 = shutil.which("sqlite3")
needs_sqlite3 = pytest.mark.skipif(SQLITE3 is None, reason="the sqlite3 command-line shell is not installed")


def offline_sql(url: str, *args: str) -> str:
    return run_alembic(url, *args, "--sql").stdout


def run_sqlite_script(path: Path, script: str) -> None:
    assert SQLITE3 is not None
    result = subprocess.run(
        [SQLITE3, "-bail", str(path)], input=script, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr


def sqlite_schema(path: Path) -> dict[str, Any]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY 1, 2"
        ).fetchall()
        # Alembic indents its own CREATE TABLE with a tab online and spaces offline.
        objects = [(kind, name, table, " ".join((sql or "").split())) for kind, name, table, sql in rows]
        versions = (
            conn.execute("SELECT version_num FROM alembic_version").fetchall(),
            conn.execute("SELECT version FROM schema_version").fetchall(),
        )
    return {"objects": objects, "versions": versions}


@needs_sqlite3
def test_sqlite_offline_upgrade_from_empty_runs_and_matches_online(tmp_path: Path) -> None:
    online = tmp_path / "online.db"
    run_alembic(online, "upgrade", "head")
    offline = tmp_path / "offline.db"
    run_sqlite_script(offline, offline_sql(str(offline), "upgrade", "head"))
    assert sqlite_schema(offline) == sqlite_schema(online)


@needs_sqlite3
@pytest.mark.parametrize(
    ("start", "verb", "span", "end"),
    [
        ("0005", "upgrade", "0005:head", "head"),
        ("0009", "upgrade", "0009:0010", "0010"),
        ("head", "downgrade", "head:0009", "0009"),
    ],
)
def test_sqlite_offline_sql_between_two_revisions_matches_online(
    tmp_path: Path, start: str, verb: str, span: str, end: str
) -> None:
    online = tmp_path / "online.db"  # the reference, built in this process
    migrate_to(online, start)
    (migrate.upgrade if verb == "upgrade" else migrate.downgrade)(online, end)
    offline = tmp_path / "offline.db"
    migrate_to(offline, start)
    run_sqlite_script(offline, offline_sql(str(offline), verb, span))
    assert sqlite_schema(offline) == sqlite_schema(online)


def pg_schema(url: str, schema: str = "public") -> dict[str, Any]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            columns = conn.exec_driver_sql(
                "SELECT table_name, column_name, data_type, is_nullable, column_default "
                f"FROM information_schema.columns WHERE table_schema = '{schema}' ORDER BY 1, 2"
            ).all()
            indexes = conn.exec_driver_sql(
                f"SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = '{schema}' ORDER BY 1"
            ).all()
            constraints = conn.exec_driver_sql(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                f"WHERE connamespace = '{schema}'::regnamespace ORDER BY 1"
            ).all()
            versions = (
                conn.exec_driver_sql(f"SELECT version_num FROM {schema}.alembic_version").all(),
                conn.exec_driver_sql(f"SELECT version FROM {schema}.schema_version").all(),
            )
    finally:
        engine.dispose()
    return {"columns": columns, "indexes": indexes, "constraints": constraints, "versions": versions}


def run_psql(url: str, script: str) -> None:
    psql = pg_server.psql_path()
    if psql is None:
        pytest.skip("the psql client is not installed")
    parsed = sa.make_url(url)
    where = ["-h", str(parsed.host), "-p", str(parsed.port or 5432), "-U", str(parsed.username)]
    command = [psql, "-v", "ON_ERROR_STOP=1", "-q", "-X", *where, "-d", str(parsed.database)]
    result = subprocess.run(command, input=script, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def second_pg_url(pg_admin_url: str) -> Any:
    with scratch_database(pg_admin_url, prefix="hermes_t", drop_in_background=True) as url:
        yield url


def test_postgresql_offline_upgrade_from_empty_runs_and_matches_online(
    pg_url: str, second_pg_url: str
) -> None:
    migrate_to(pg_url, "head")  # the reference, online in this process
    run_psql(second_pg_url, offline_sql(second_pg_url, "upgrade", "head"))
    assert pg_schema(second_pg_url) == pg_schema(pg_url)


def test_postgresql_offline_sql_between_two_revisions_matches_online(pg_url: str, second_pg_url: str) -> None:
    migrate_to(pg_url, "head")  # the reference, online in this process
    migrate_to(second_pg_url, "0005")
    run_psql(second_pg_url, offline_sql(second_pg_url, "upgrade", "0005:head"))
    assert pg_schema(second_pg_url) == pg_schema(pg_url)


def test_postgresql_offline_upgrade_of_a_profile_matches_online(pg_url: str, second_pg_url: str) -> None:
    def profile(url: str) -> str:
        return sa.make_url(url).update_query_dict({"profile": "work"}).render_as_string(hide_password=False)

    migrate_to(profile(pg_url), "head")
    script = offline_sql(profile(second_pg_url), "upgrade", "head")
    assert 'CREATE SCHEMA IF NOT EXISTS "hermes_work"' in script
    run_psql(second_pg_url, script)
    assert pg_schema(second_pg_url, "hermes_work") == pg_schema(pg_url, "hermes_work")
    engine = sa.create_engine(second_pg_url)
    try:
        with engine.connect() as conn:  # nothing was made in public
            in_public = conn.exec_driver_sql("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
            assert in_public.scalar() == 0
    finally:
        engine.dispose()
