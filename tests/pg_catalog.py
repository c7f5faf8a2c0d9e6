"""A PostgreSQL database's schema as comparable data, and the ``alembic``/``psql`` commands
the migration tests run.

:func:`catalog` dumps what a migration creates — columns (type, nullability, generation,
default), indexes with their validity, constraints, triggers, our functions (not the
extensions'), and both version tables — so two databases reached by different paths (a
clean upgrade, a killed and rerun one, one from the first revision 0012) can be compared
with ``==``.
"""

from __future__ import annotations

import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import pg_server
import pytest
import sqlalchemy as sa
from support import REPO_ROOT, migrate_to

MIGRATOR = "hermes-store migration"
"""``application_name`` of the migration session (``migrations/env.py``)."""


def revision_module(revision: str) -> Any:
    """The module of a shipped revision script (its SQL constants), through Alembic's API."""
    from alembic.script import ScriptDirectory

    from hermes_store.schema.revisions import migrations_path

    script = ScriptDirectory(migrations_path()).get_revision(revision)
    assert script is not None, revision
    return script.module


def engine_for(url: str) -> sa.Engine:
    """An engine that keeps no connection open after use (a test may drop the database)."""
    return sa.create_engine(url, poolclass=sa.pool.NullPool)


def migrate_with_rows(url: str, revision: str, statements: Iterable[str]) -> None:
    """Migrate the empty database at ``url`` to ``revision``, then run ``statements`` (the
    rows a migration test needs) in one transaction."""
    migrate_to(url, revision)
    engine = engine_for(url)
    with engine.begin() as connection:
        for statement in statements:
            connection.exec_driver_sql(statement)
    engine.dispose()


def search_hits(url: str, queries: Iterable[str], limit: int) -> dict[str, list[int]]:
    """The ids each query finds through this release's ``search_messages`` (at most
    ``limit``: above the rows' count, every hit), sorted.

    A database below the oldest revision this release serves (a migration test's state
    before or after an older revision) is searched all the same, through the search
    statements of its revision; messages there have no ``active`` column yet, so every
    message counts (``include_inactive``), as it did for the releases of those revisions.
    """
    from hermes_store import SessionDB
    from hermes_store.schema import migrate

    revision = migrate.current_revision(url)
    floor = migrate.OLDEST_RUNNABLE_REVISION
    below_floor = not migrate.history().reaches(revision, floor)
    if below_floor:
        migrate.OLDEST_RUNNABLE_REVISION = str(revision)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", migrate.SchemaBehindWarning)
            db = SessionDB(url=url)
    finally:
        migrate.OLDEST_RUNNABLE_REVISION = floor
    try:
        found = {
            query: db.search_messages(query, limit=limit, include_inactive=below_floor) for query in queries
        }
        return {query: sorted(int(hit["id"]) for hit in hits) for query, hits in found.items()}
    finally:
        db.close()


def scalar(url: str, sql: str) -> object:
    """The first column of the first row of ``sql`` at ``url``, on a connection of its own."""
    engine = engine_for(url)
    with engine.connect() as connection:
        value = connection.exec_driver_sql(sql).scalar()
    engine.dispose()
    return value


def wait_for(condition: Callable[[], object], what: str, timeout_s: float = 120.0) -> object:
    """Poll ``condition`` every 20 ms until it is truthy (returned) or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


HOLD_LOCK = 424_242
"""The advisory lock :func:`hold_update_of` makes an UPDATE wait for."""


def hold_update_of(url: str, row_id: int | str, table: str = "messages") -> Callable[[], None]:
    """Make any UPDATE of row ``row_id`` of ``table`` at ``url`` wait until the returned
    function is called: a test-only trigger on that row waits for an advisory lock this
    function holds on a connection of its own. So a backfill stops inside the batch holding
    the row whatever the timing (:func:`update_is_held` says when it waits). The returned
    function releases the lock and drops the trigger."""
    engine = engine_for(url)
    key = f"'{row_id}'" if isinstance(row_id, str) else str(int(row_id))
    with engine.begin() as connection:
        connection.exec_driver_sql(
            "CREATE FUNCTION test_wait_for_release() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"PERFORM pg_advisory_xact_lock_shared({HOLD_LOCK}); RETURN NEW; END $$"
        )
        connection.exec_driver_sql(
            f"CREATE TRIGGER test_wait_for_release BEFORE UPDATE ON {table} FOR EACH ROW "
            f"WHEN (NEW.id = {key}) EXECUTE FUNCTION test_wait_for_release()"
        )
    holder = engine.connect()
    holder.exec_driver_sql(f"SELECT pg_advisory_lock({HOLD_LOCK})").all()

    def release() -> None:
        holder.exec_driver_sql(f"SELECT pg_advisory_unlock({HOLD_LOCK})").all()
        holder.close()
        with engine.begin() as connection:
            connection.exec_driver_sql(f"DROP TRIGGER test_wait_for_release ON {table}")
            connection.exec_driver_sql("DROP FUNCTION test_wait_for_release()")
        engine.dispose()

    return release


def update_is_held(url: str) -> bool:
    """True while a session at ``url`` waits for :func:`hold_update_of`'s lock."""
    return bool(
        scalar(
            url,
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            f"AND objid = {HOLD_LOCK} AND database = (SELECT oid FROM pg_database "
            "WHERE datname = current_database())",
        )
    )


def catalog(url: str) -> dict[str, Any]:
    """The schema of the ``public`` namespace at ``url``, in a stable order."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:

            def rows(sql: str) -> list[tuple[Any, ...]]:
                return [tuple(row) for row in conn.exec_driver_sql(sql).all()]

            return {
                "columns": rows(
                    "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, "
                    "a.attgenerated, pg_get_expr(d.adbin, d.adrelid) "
                    "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
                    "LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
                    "WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' "
                    "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1, a.attnum"
                ),
                "indexes": rows(
                    "SELECT c.relname, pg_get_indexdef(i.indexrelid), i.indisvalid, i.indisready "
                    "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                    "WHERE c.relnamespace = 'public'::regnamespace ORDER BY 1"
                ),
                "constraints": rows(
                    "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                    "WHERE connamespace = 'public'::regnamespace ORDER BY 1"
                ),
                "triggers": rows(
                    "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1"
                ),
                "functions": rows(
                    "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p "
                    "WHERE p.pronamespace = 'public'::regnamespace AND NOT EXISTS ("
                    "  SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass "
                    "  AND d.objid = p.oid AND d.deptype = 'e') ORDER BY 1"
                ),
                "versions": rows(
                    "SELECT (SELECT version_num FROM alembic_version), (SELECT version FROM schema_version)"
                ),
            }
    finally:
        engine.dispose()


def alembic_command(url: str, *args: str) -> list[str]:
    """The real ``alembic`` command line for ``url``."""
    return [sys.executable, "-m", "alembic", "-x", f"url={url}", *args]


def alembic(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the real ``alembic`` command on ``url`` from the checkout; fail the test on error."""
    result = subprocess.run(
        alembic_command(url, *args), cwd=REPO_ROOT, capture_output=True, text=True, check=False, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result


def run_psql(url: str, script: str) -> None:
    """Run ``script`` with ``psql -v ON_ERROR_STOP=1`` (one statement at a time, as a DBA does)."""
    psql = pg_server.psql_path()
    if psql is None:
        pytest.skip("the psql client is not installed")
    parsed = sa.make_url(url)
    where = ["-h", str(parsed.host), "-p", str(parsed.port or 5432), "-U", str(parsed.username)]
    command = [psql, "-v", "ON_ERROR_STOP=1", "-q", "-X", *where, "-d", str(parsed.database)]
    result = subprocess.run(command, input=script, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
