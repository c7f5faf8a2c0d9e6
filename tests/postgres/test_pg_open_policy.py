"""Opening a PostgreSQL store never migrates a database that has a schema.

An empty database gets the schema at head; one behind head is used as it is (with a
warning naming ``hermes-store upgrade``) when this release runs on it, and refused with
:class:`SchemaBehind` when it does not; ``auto_upgrade=True`` (sync and async) migrates
on open. Databases are put behind head by Alembic's upgrade command (in process), and
brought to head by the real ``hermes-store`` command the warning names. A SQLite file keeps
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
from hermes_store.schema import migrate
from hermes_store.schema.legacy import NewerSchemaWarning
from hermes_store.schema.revisions import OLDEST_RUNNABLE_REVISION, history

REPO = Path(__file__).resolve().parents[2]
HEAD = history().head
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


def test_a_database_at_the_oldest_runnable_revision_is_used_as_it_is_then_upgraded(pg_url: str) -> None:
    _alembic_to(pg_url, OLDEST_RUNNABLE_REVISION)
    _with_rows(pg_url)
    db, caught = _opened_with_warnings(pg_url)
    try:
        behind = [str(w.message) for w in caught if issubclass(w.category, SchemaBehindWarning)]
        assert len(behind) == 1 and "'hermes-store --url postgresql+psycopg://" in behind[0]
        assert behind[0].endswith("upgrade' to finish the deploy")
        assert current_revision(pg_url) == OLDEST_RUNNABLE_REVISION  # opening migrated nothing
        # Everything a service does works on the old schema, search included (0011's indexes).
        db.create_session("new", "api")
        db.append_message("new", "assistant", "zebrafinch songs 记忆")
        assert {h["session_id"] for h in db.search_messages("zebrafinch")} == {"old", "new"}
        assert {h["session_id"] for h in db.search_messages("记忆")} == {"old", "new"}
        assert {s["id"] for s in db.list_sessions_rich()} == {"old", "new"}
        assert db.export_session("old")["messages"][0]["content"] == "zebrafinch nests 记忆"  # type: ignore[index]
        # The deploy step the warning names, run while the service keeps its store open.
        result = _run(sys.executable, "-m", "hermes_store.cli", "--url", pg_url, "upgrade")
        assert result.returncode == 0, result.stderr
        assert current_revision(pg_url) == HEAD
        db.append_message("new", "user", "after the upgrade zebrafinch")
        assert len(db.search_messages("zebrafinch")) == 3  # now through the stored vector
        assert {h["session_id"] for h in db.search_messages("记忆")} == {"old", "new"}
    finally:
        db.close()


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
    _alembic_to(pg_url, OLDEST_RUNNABLE_REVISION)
    _with_rows(pg_url)
    db = SessionDB(url=pg_url, auto_upgrade=True)
    assert current_revision(pg_url) == HEAD and db.get_session("old") is not None
    db.close()

    with scratch_database(pg_admin_url, "hermes_pgopen_async") as url:
        _alembic_to(url, OLDEST_RUNNABLE_REVISION)

        async def open_async(**options: bool) -> list[str]:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                async with AsyncSessionDB(url=url, **options) as store:
                    await store.create_session("a", "api")
            return [str(w.message) for w in caught if issubclass(w.category, SchemaBehindWarning)]

        assert len(asyncio.run(open_async())) == 1 and current_revision(url) == OLDEST_RUNNABLE_REVISION
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
    """Another process holds the migration lock (as a long upgrade does): a default open
    does not wait for it at all, and a migrating open waits a bounded time, then says why."""
    _alembic_to(pg_url, OLDEST_RUNNABLE_REVISION)
    migrator = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    with migrator.connect() as connection, connection.begin():
        connection.exec_driver_sql(MIGRATION_LOCK)
        outcome: list[object] = []

        def open_store() -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SchemaBehindWarning)
                db = SessionDB(url=pg_url)
            db.create_session("while-migrating", "api")
            db.close()
            outcome.append("opened")

        opener = threading.Thread(target=open_store, daemon=True)
        opener.start()
        opener.join(timeout=60)  # generous: a default open takes no lock at all
        assert outcome == ["opened"]

        monkeypatch.setattr(migrate, "MIGRATION_LOCK_WAIT_S", 0.5)
        with pytest.raises(SchemaError, match="another migration of this database has held its lock"):
            SessionDB(url=pg_url, auto_upgrade=True)
    migrator.dispose()
    assert current_revision(pg_url) == OLDEST_RUNNABLE_REVISION


def test_a_sqlite_file_behind_head_is_still_upgraded_on_open(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    _alembic_to(url, OLDEST_RUNNABLE_REVISION)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SchemaBehindWarning)
        SessionDB(tmp_path / "state.db").close()
    assert current_revision(url) == HEAD


def test_word_search_at_0011_is_served_by_0011s_index(pg_url: str) -> None:
    """Before the upgrade, word search reads 0011's expression index (no scan of messages)."""
    _alembic_to(pg_url, "0011")
    _with_rows(pg_url)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SchemaBehindWarning)
        db = SessionDB(url=pg_url)
    sent: list[tuple[str, object]] = []

    def record(_conn: object, _cursor: object, statement: str, parameters: object, *_: object) -> None:
        if "ts_rank" in statement:
            sent.append((statement, parameters))

    sa.event.listen(db.engine, "before_cursor_execute", record)
    assert [h["session_id"] for h in db.search_messages("zebrafinch")] == ["old"]
    sa.event.remove(db.engine, "before_cursor_execute", record)
    ((statement, parameters),) = sent
    assert "search_vector" not in statement
    raw = db.engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute("SET enable_seqscan = off")  # on a tiny table: any usable index is used
        cursor.execute("EXPLAIN " + statement, parameters)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        raw.rollback()
    finally:
        raw.close()
        db.close()
    assert "idx_messages_fts" in plan, plan
