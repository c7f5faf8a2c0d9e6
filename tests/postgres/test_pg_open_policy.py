"""Opening a PostgreSQL store never migrates a database that has a schema.

An empty database gets the schema at head; one behind head is used as it is (with a
warning naming ``hermes-store upgrade``) when this release runs on it, and refused with
:class:`SchemaBehind` when it does not (this release needs revision 0019, so the revision
before it is refused until the deploy step runs; the warning is shown with a copy of the
scripts holding one revision more); ``auto_upgrade=True`` (sync and async) migrates
on open. Databases are put behind head by Alembic's upgrade command (in process), and
brought to head by the real ``hermes-store`` command the refusal names. A SQLite file keeps
upstream's upgrade-on-open.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest
import sqlalchemy as sa
from pg_server import scratch_database

from hermes_store import SchemaBehind, SchemaBehindWarning, SchemaError, SessionDB, current_revision
from hermes_store.aio import AsyncSessionDB
from hermes_store.db.engine import create_engine
from hermes_store.schema import migrate
from hermes_store.schema.legacy import NewerSchemaWarning
from hermes_store.schema.revisions import OLDEST_RUNNABLE_REVISION, history, migrations_path

REPO = Path(__file__).resolve().parents[2]
HEAD = history().head
PREVIOUS = history().revisions[history().revisions.index(OLDEST_RUNNABLE_REVISION) - 1]
"""The newest revision this release refuses (the previous release's head)."""
NEXT_REVISION = '''"""A revision after head (added by a test).

Revision ID: {new}
Revises: {head}
"""

from alembic import op

revision = "{new}"
down_revision = "{head}"


def upgrade() -> None:
    op.execute("CREATE INDEX IF NOT EXISTS idx_test_sessions_model ON sessions (model)")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS idx_test_sessions_model")
'''
MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(8675309011)"  # what a migrating process holds


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False, timeout=300)


def _alembic_to(url: str, revision: str) -> None:
    """Put the database at ``revision`` through Alembic's own upgrade command (in process)."""
    migrate.upgrade(url, revision)


def _with_rows(url: str) -> None:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.begin() as connection:
        connection.exec_driver_sql(
            "INSERT INTO sessions (id, source, started_at, message_count, tool_call_count, "
            "input_tokens, output_tokens) VALUES ('old', 'cli', 1.7e9, 1, 0, 0, 0)"
        )
        connection.exec_driver_sql(
            "INSERT INTO messages (session_id, role, content, timestamp) "
            "VALUES ('old', 'user', 'zebrafinch nests 记忆', 1.7e9)"
        )
    engine.dispose()


def _opened_with_warnings(url: str, **options: object) -> tuple[SessionDB, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        db = SessionDB(url=url, **options)  # type: ignore[arg-type]
    return db, list(caught)


def test_an_empty_database_is_created_at_head(pg_url: str) -> None:
    db, caught = _opened_with_warnings(pg_url)
    db.close()
    assert current_revision(pg_url) == HEAD
    assert not [w for w in caught if issubclass(w.category, SchemaBehindWarning)]


def test_the_previous_revision_is_refused_until_the_deploy_step_upgrades_it(pg_url: str) -> None:
    assert OLDEST_RUNNABLE_REVISION == "0019"  # this release reads the columns of 0019
    _alembic_to(pg_url, PREVIOUS)
    _with_rows(pg_url)
    with pytest.raises(SchemaBehind, match=f"revision {PREVIOUS}"):
        SessionDB(url=pg_url)
    assert current_revision(pg_url) == PREVIOUS  # opening migrated nothing
    # The deploy step the refusal names.
    result = _run(sys.executable, "-m", "hermes_store.cli", "--url", pg_url, "upgrade")
    assert result.returncode == 0, result.stderr
    assert current_revision(pg_url) == HEAD
    db, caught = _opened_with_warnings(pg_url)
    try:
        assert not [w for w in caught if issubclass(w.category, SchemaBehindWarning)]
        db.create_session("new", "api")
        db.append_message("new", "assistant", "zebrafinch songs 记忆")
        assert {h["session_id"] for h in db.search_messages("zebrafinch")} == {"old", "new"}
        assert {h["session_id"] for h in db.search_messages("记忆")} == {"old", "new"}
        assert {s["id"] for s in db.list_sessions_rich()} == {"old", "new"}
        assert db.export_session("old")["messages"][0]["content"] == "zebrafinch nests 记忆"  # type: ignore[index]
    finally:
        db.close()


def test_a_database_behind_head_but_runnable_is_used_as_it_is_with_a_warning(
    pg_url: str, tmp_path: Path
) -> None:
    """Scripts one revision past the shipped head: a database at the shipped head is behind
    them and still runnable, so it is used as it is and the warning names the deploy step."""
    import shutil

    location = tmp_path / "migrations"
    shutil.copytree(migrations_path(), location, ignore=shutil.ignore_patterns("__pycache__"))
    new = f"{int(HEAD) + 1:04d}"
    (location / "versions" / f"{new}_test.py").write_text(NEXT_REVISION.format(new=new, head=HEAD))
    _alembic_to(pg_url, HEAD)
    _with_rows(pg_url)
    engine = create_engine(pg_url)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            state = migrate.ensure_schema(engine, script_location=str(location))
    finally:
        engine.dispose()
    behind = [str(w.message) for w in caught if issubclass(w.category, SchemaBehindWarning)]
    assert state.revision == HEAD and state.runnable and not state.at_head
    assert len(behind) == 1 and f"behind this hermes_store's head {new}" in behind[0]
    assert behind[0].endswith("upgrade' to finish the deploy")
    assert current_revision(pg_url) == HEAD


def test_a_database_older_than_this_release_runs_on_is_refused_in_one_line(pg_url: str) -> None:
    older = history().revisions[history().revisions.index(OLDEST_RUNNABLE_REVISION) - 1]
    _alembic_to(pg_url, older)
    with pytest.raises(SchemaBehind) as refused:
        SessionDB(url=pg_url)
    message = str(refused.value)
    assert "\n" not in message and f"revision {older}" in message
    assert "'hermes-store --url postgresql+psycopg://" in message and message.endswith("upgrade'")
    assert isinstance(refused.value, SchemaError)
    assert current_revision(pg_url) == older
    with pytest.raises(SchemaBehind):
        asyncio.run(AsyncSessionDB(url=pg_url).open())


def test_auto_upgrade_migrates_on_open_sync_and_async(pg_admin_url: str, pg_url: str) -> None:
    _alembic_to(pg_url, PREVIOUS)
    _with_rows(pg_url)
    db = SessionDB(url=pg_url, auto_upgrade=True)
    assert current_revision(pg_url) == HEAD and db.get_session("old") is not None
    db.close()

    with scratch_database(pg_admin_url, "hermes_pgopen_async") as url:
        _alembic_to(url, PREVIOUS)

        async def open_async(**options: bool) -> list[str]:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                async with AsyncSessionDB(url=url, **options) as store:
                    await store.create_session("a", "api")
            return [str(w.message) for w in caught if issubclass(w.category, SchemaBehindWarning)]

        with pytest.raises(SchemaBehind):
            asyncio.run(open_async())
        assert current_revision(url) == PREVIOUS
        assert asyncio.run(open_async(auto_upgrade=True)) == [] and current_revision(url) == HEAD


def test_a_database_newer_than_this_release_is_used_with_a_warning(pg_url: str) -> None:
    SessionDB(url=pg_url).close()
    engine = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    with engine.begin() as connection:
        connection.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    engine.dispose()
    db, caught = _opened_with_warnings(pg_url)
    db.create_session("s", "cli")
    db.close()
    assert [w for w in caught if issubclass(w.category, NewerSchemaWarning)]
    assert current_revision(pg_url) == "9999"


def test_opening_never_queues_behind_a_migrating_process(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the migration lock (as a long upgrade does) without moving the
    schema: a default open waits only while the schema stands still for a few seconds, then
    refuses the old schema, and a migrating open waits a bounded time, then says why."""
    _alembic_to(pg_url, PREVIOUS)
    migrator = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    with migrator.connect() as connection, connection.begin():
        connection.exec_driver_sql(MIGRATION_LOCK)
        outcome: list[object] = []

        def open_store() -> None:
            try:
                SessionDB(url=pg_url).close()
            except SchemaBehind:
                outcome.append("refused")

        opener = threading.Thread(target=open_store, daemon=True)
        opener.start()
        opener.join(timeout=60)  # generous: a default open takes no lock at all
        assert outcome == ["refused"]

        monkeypatch.setattr(migrate, "MIGRATION_LOCK_WAIT_S", 0.5)
        with pytest.raises(SchemaError, match="another migration of this database has held its lock"):
            SessionDB(url=pg_url, auto_upgrade=True)
    migrator.dispose()
    assert current_revision(pg_url) == PREVIOUS


def test_a_sqlite_file_behind_head_is_still_upgraded_on_open(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    _alembic_to(url, PREVIOUS)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SchemaBehindWarning)
        SessionDB(tmp_path / "state.db").close()
    assert current_revision(url) == HEAD
