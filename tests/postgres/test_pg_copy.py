"""``hermes-store copy`` into and out of PostgreSQL: COPY, exactness, refusal, SIGKILL + resume."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from copy_support import (
    assert_same_store,
    copy_command,
    copy_environment,
    fill_head_extras,
    fill_store,
    kill_copy_after,
)

import hermes_store
from hermes_store import SessionDB
from hermes_store.admin.transfer import copy_store
from hermes_store.db.engine import create_engine
from hermes_store.errors import CopyRefused

_CATALOG = """
    SELECT 'index ' || indexname || ': ' || indexdef FROM pg_indexes
    WHERE tablename IN ('sessions', 'messages')
    UNION ALL
    SELECT 'constraint ' || conname || ': ' || pg_get_constraintdef(oid) FROM pg_constraint
    WHERE conrelid IN ('sessions'::regclass, 'messages'::regclass)
    UNION ALL
    SELECT 'table ' || tablename FROM pg_tables WHERE schemaname = 'public'
    ORDER BY 1
"""


def _catalog(url: str) -> list[str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            return [str(line) for line in connection.exec_driver_sql(_CATALOG).scalars()]
    finally:
        engine.dispose()


def _scalar(url: str, sql: str) -> Any:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            return connection.exec_driver_sql(sql).scalar()
    finally:
        engine.dispose()


def test_copy_sqlite_to_postgresql_and_back_is_exact(pg_url: str, tmp_path: Path) -> None:
    source = SessionDB(tmp_path / "source.db")
    source.create_session("root", "cli", model="m", model_config={"temperature": 0.2})
    source.create_session("child", "cli", parent_session_id="root")
    source.set_session_title("root", "Root title")
    for i in range(30):
        source.append_message("root" if i % 2 else "child", "user", f"message {i} 中文")
    source.append_message("child", "user", [{"type": "text", "text": "multimodal"}])
    source.update_token_counts("root", input_tokens=7, estimated_cost_usd=0.25)
    source.set_meta("last_auto_prune", "123.5")
    hermes_store.upgrade(pg_url)
    schema = _catalog(pg_url)

    report = copy_store(create_engine(tmp_path / "source.db"), create_engine(pg_url), batch_rows=7)
    # state_meta: the source's key and the Telegram topic-schema key every store at head holds.
    assert (report.sessions, report.messages, report.meta) == (2, 31, 2)
    assert report.searched
    assert_same_store(create_engine(tmp_path / "source.db"), create_engine(pg_url))
    # Every index and constraint set aside for the load is back, and the bookkeeping is gone.
    assert _catalog(pg_url) == schema

    back = tmp_path / "back.db"
    copy_store(create_engine(pg_url), create_engine(back))
    assert_same_store(create_engine(tmp_path / "source.db"), create_engine(back))
    on_back = SessionDB(back)

    def dump(db: SessionDB) -> str:
        return json.dumps(db.export_all(), sort_keys=True, default=str)

    assert dump(on_back) == dump(source)
    on_pg = SessionDB(url=pg_url)
    assert on_pg.append_message("root", "user", "after the copy") == 32  # the sequence moved on
    for db in (source, on_back, on_pg):
        db.close()


def test_copy_refuses_a_postgresql_target_that_holds_messages(pg_url: str, tmp_path: Path) -> None:
    fill_store(tmp_path / "source.db", 2, 2)
    with SessionDB(url=pg_url) as db:
        db.create_session("already-here", "cli")
        db.append_message("already-here", "user", "hello")
    with pytest.raises(CopyRefused, match=r"already holds 1 session\(s\) and 1 message\(s\)"):
        copy_store(create_engine(tmp_path / "source.db"), create_engine(pg_url))
    assert _scalar(pg_url, "SELECT COUNT(*) FROM messages") == 1
    assert _scalar(pg_url, "SELECT to_regclass('hermes_copy_state') IS NULL") is True


def test_cursor_events_see_one_copy_statement_per_batch(pg_url: str, tmp_path: Path) -> None:
    fill_store(tmp_path / "source.db", 3, 10)
    target = create_engine(pg_url)
    seen: list[str] = []
    sa.event.listen(target, "before_cursor_execute", lambda _c, _cur, statement, *_: seen.append(statement))
    copy_store(create_engine(tmp_path / "source.db"), target, batch_rows=8)
    copies = [statement for statement in seen if statement.startswith("COPY")]
    # Sessions: one batch of 3; messages: 30 in batches of 8; then each small table whole
    # (the source never used Telegram topic mode, so it has no topic table to copy).
    small = ["compression_locks"]
    assert [statement.split(" ", 2)[1] for statement in copies] == ["sessions"] + ["messages"] * 4 + small


def test_copy_command_refuses_a_second_copy_in_one_line(pg_url: str, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from hermes_store.cli import cli

    fill_store(tmp_path / "state.db", 1, 1)
    runner = CliRunner()
    first = runner.invoke(cli, ["copy", str(tmp_path / "state.db"), pg_url, "--json"])
    assert first.exit_code == 0, first.output
    summary = json.loads(first.output)
    assert (summary["sessions"], summary["messages"], summary["meta"]) == (1, 1, 2)
    second = runner.invoke(cli, ["copy", str(tmp_path / "state.db"), pg_url])
    assert second.exit_code == 1
    assert second.output.strip().splitlines() == [
        "Error: the target already holds 1 session(s) and 1 message(s); copy only into an empty store: "
        "name a new database as the target"
    ]


@pytest.mark.serial
def test_sigkill_mid_copy_then_resume_gives_the_source(
    pg_url: str, tmp_path: Path, fresh_catalog: list[str]
) -> None:
    source = tmp_path / "source.db"
    total = fill_store(source, 30, 40)
    kill_copy_after(source, pg_url, 3 * 20)
    left = int(_scalar(pg_url, "SELECT COUNT(*) FROM messages"))
    assert 3 * 20 <= left < total, "the copy was killed with every message committed; nothing to resume"

    with pytest.raises(CopyRefused, match="holds an interrupted copy"):
        copy_store(create_engine(source), create_engine(pg_url))  # without --resume

    resumed = subprocess.run(
        copy_command(source, pg_url, "--resume", "--json"),
        capture_output=True,
        text=True,
        env=copy_environment(),
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["messages"] == total
    assert summary["resumed_after_message_id"] == left  # ids 1…N, so the count is the last id
    assert_same_store(create_engine(source), create_engine(pg_url))
    assert _scalar(pg_url, "SELECT to_regclass('hermes_copy_state') IS NULL") is True
    assert _catalog(pg_url) == fresh_catalog


@pytest.fixture(scope="module")
def fresh_catalog(pg_admin_url: str) -> list[str]:
    """The catalog of a PostgreSQL store just migrated to head (made once per module)."""
    return _catalog_of_a_fresh_store(sa.make_url(pg_admin_url))


def _catalog_of_a_fresh_store(url: sa.URL) -> list[str]:
    name = f"hermes_fresh_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
        fresh = url.set(database=name).render_as_string(hide_password=False)
        hermes_store.upgrade(fresh)
        return _catalog(fresh)
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def test_the_shipped_postgresql_catalog_is_what_a_fresh_store_has(pg_url: str) -> None:
    from hermes_store.admin import postgresql_head_schema as shipped
    from hermes_store.admin.copy_schema import SchemaObject, read_schema

    hermes_store.upgrade(pg_url)
    engine = create_engine(pg_url, prepare=False)
    try:
        fresh = read_schema(engine)
    finally:
        engine.dispose()
    assert fresh.revision == shipped.REVISION
    expected = sorted(SchemaObject(*row) for row in shipped.OBJECTS)
    # Retake with: python -m hermes_store.admin.copy_schema URL > hermes_store/admin/postgresql_head_schema.py
    assert sorted(fresh.objects.values()) == expected
    assert [item.create for item in sorted(fresh.objects.values())] == [item.create for item in expected]
    assert fresh.seed_meta == shipped.SEED_META


def _stop_after_messages(count: int) -> Any:
    class Interrupt(Exception):
        pass

    def progress(step: str, done: int, total: int | None) -> None:
        if step == "messages" and done >= count:
            raise Interrupt

    return Interrupt, progress


def test_a_copy_whose_bookkeeping_was_dropped_still_ends_with_every_index(
    pg_url: str, tmp_path: Path, fresh_catalog: list[str]
) -> None:
    source = tmp_path / "source.db"
    fill_store(source, 6, 10)
    fill_head_extras(source)
    interrupt, progress = _stop_after_messages(20)
    with pytest.raises(interrupt):
        copy_store(create_engine(source), create_engine(pg_url), progress, batch_rows=10)
    # The load had set the secondary indexes and foreign keys aside; the operator removes
    # the bookkeeping and the rows by hand and copies again.
    engine = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    with engine.begin() as connection:
        assert connection.exec_driver_sql("SELECT to_regclass('idx_messages_session')").scalar() is None
        connection.exec_driver_sql("DROP TABLE hermes_copy_state")
        connection.exec_driver_sql(
            "TRUNCATE messages, sessions, telegram_dm_topic_bindings, compression_locks"
        )
    engine.dispose()
    copy_store(create_engine(source), create_engine(pg_url), batch_rows=10)
    assert_same_store(create_engine(source), create_engine(pg_url))
    assert _catalog(pg_url) == fresh_catalog


@pytest.mark.serial
def test_sigkill_then_a_changed_source_then_restart_gives_the_whole_schema(
    pg_url: str, tmp_path: Path, fresh_catalog: list[str]
) -> None:
    source = tmp_path / "source.db"
    fill_store(source, 30, 40)
    fill_head_extras(source)
    kill_copy_after(source, pg_url, 3 * 20)
    with closing(sqlite3.connect(source)) as connection, connection:
        connection.execute("DELETE FROM messages WHERE id = 1000")
        connection.execute("UPDATE sessions SET title = 'Renamed' WHERE id = 's00003'")
    with pytest.raises(CopyRefused) as plain:
        copy_store(create_engine(source), create_engine(pg_url))
    assert "of a source that has changed since; run the same copy with --restart" in str(plain.value)
    with pytest.raises(CopyRefused) as resumed:
        copy_store(create_engine(source), create_engine(pg_url), resume=True)
    assert str(resumed.value).startswith("the source has changed since the interrupted copy began")
    assert str(resumed.value).endswith("run the same copy with --restart to empty the target and copy again")
    report = copy_store(create_engine(source), create_engine(pg_url), restart=True, batch_rows=200)
    assert (report.restarted, report.messages) == (True, 1199)
    assert_same_store(create_engine(source), create_engine(pg_url))
    assert _scalar(pg_url, "SELECT to_regclass('hermes_copy_state') IS NULL") is True
    assert _catalog(pg_url) == fresh_catalog


def test_verify_against_postgresql_names_corrupted_content_and_schema(pg_url: str, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from hermes_store.cli import cli

    source = tmp_path / "source.db"
    fill_store(source, 4, 10)
    fill_head_extras(source)
    copy_store(create_engine(source), create_engine(pg_url))
    runner = CliRunner()

    def verify() -> str:
        result = runner.invoke(cli, ["verify", str(source), pg_url])
        return f"{result.exit_code} {result.output.strip()}"

    assert verify().startswith("0 Verified 4 session(s), 40 message(s)")
    # (corruption, what verify names, undo)
    cases = [
        (
            # JSON content: each backend marks it with its own sentinel; values are compared decoded.
            "UPDATE messages SET content = replace(content, 'picture', 'drawing') WHERE id = 6",
            "messages 6 column content",
            "UPDATE messages SET content = replace(content, 'drawing', 'picture') WHERE id = 6",
        ),
        (
            "UPDATE messages SET role = 'tool' WHERE id = 9",
            "messages 9 column role: source 'user', target 'tool'",
            "UPDATE messages SET role = 'user' WHERE id = 9",
        ),
        (
            "UPDATE sessions SET title = 'Changed' WHERE id = 's00001'",
            "sessions 's00001' column title: source 'Title 1', target 'Changed'",
            "UPDATE sessions SET title = 'Title 1' WHERE id = 's00001'",
        ),
        (
            "UPDATE state_meta SET value = '1' WHERE key = 'last_auto_prune'",
            "state_meta 'last_auto_prune' column value: source '123.5', target '1'",
            "UPDATE state_meta SET value = '123.5' WHERE key = 'last_auto_prune'",
        ),
        (
            "DROP INDEX idx_messages_trgm",
            "index idx_messages_trgm on messages is missing from the target",
            _index_statement("idx_messages_trgm"),
        ),
        (
            "ALTER TABLE messages DROP CONSTRAINT fk_messages_session_id_sessions",
            "constraint fk_messages_session_id_sessions on messages is missing from the target",
            "ALTER TABLE messages ADD CONSTRAINT fk_messages_session_id_sessions "
            "FOREIGN KEY (session_id) REFERENCES sessions(id)",
        ),
    ]
    engine = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    try:
        for corruption, named, undo in cases:
            with engine.begin() as connection:
                connection.exec_driver_sql(corruption)
            found = verify()
            assert found.startswith("1 Error: the target") and named in found, (corruption, found)
            with engine.begin() as connection:
                connection.exec_driver_sql(undo)
        assert verify().startswith("0 Verified")
    finally:
        engine.dispose()


def _index_statement(name: str) -> str:
    from hermes_store.admin import postgresql_head_schema as shipped

    (statement,) = [row[4] for row in shipped.OBJECTS if row[1] == name]
    assert statement is not None
    return statement


def test_copy_postgresql_to_sqlite_carries_every_table_and_verifies_both_ways(
    pg_url: str, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from hermes_store.cli import cli

    source, back = tmp_path / "source.db", tmp_path / "back.db"
    fill_store(source, 5, 8)
    fill_head_extras(source)
    copy_store(create_engine(source), create_engine(pg_url), batch_rows=9)
    copy_store(create_engine(pg_url), create_engine(back), batch_rows=9)
    assert_same_store(create_engine(source), create_engine(back))
    runner = CliRunner()
    for pair in ((pg_url, str(back)), (str(source), pg_url)):
        result = runner.invoke(cli, ["verify", *pair])
        assert result.exit_code == 0, result.output


def test_verify_merges_ids_in_byte_order_in_a_database_that_sorts_text_otherwise(
    pg_admin_url: str, tmp_path: Path
) -> None:
    """In an ICU ``en-US`` database ``ORDER BY id`` puts 'alpha' before 'Zeta'; the
    verification must read both stores in the same order all the same."""
    admin = sa.create_engine(pg_admin_url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    name = f"hermes_icu_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(
                f"CREATE DATABASE \"{name}\" LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8' "
                "TEMPLATE template0"
            )
    except sa.exc.DBAPIError as exc:
        admin.dispose()
        pytest.skip(f"no ICU collation on this server: {exc.orig}")
    url = sa.make_url(pg_admin_url).set(database=name).render_as_string(hide_password=False)
    try:
        source = tmp_path / "source.db"
        with SessionDB(source) as db:
            for session_id in ("Zeta", "alpha", "émile", "日本", "_x", "b"):
                db.create_session(session_id, "cli")
                db.append_message(session_id, "user", f"hello from {session_id}")
        copy_store(create_engine(source), create_engine(url))
        back = tmp_path / "back.db"
        copy_store(create_engine(url), create_engine(back))
        engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
        with engine.connect() as connection:
            ordered = list(connection.exec_driver_sql("SELECT id FROM sessions ORDER BY id").scalars())
        engine.dispose()
        assert ordered.index("alpha") < ordered.index("Zeta")  # not byte order
        from hermes_store.admin.copy_verify import verify_copy

        assert verify_copy(create_engine(url), create_engine(back)).sessions == 6
        assert verify_copy(create_engine(source), create_engine(url)).messages == 6
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def test_text_that_looks_like_stored_json_is_copied_as_text_both_ways(pg_url: str, tmp_path: Path) -> None:
    source, back = tmp_path / "source.db", tmp_path / "back.db"
    contents = ['\ue000json:{"role": "system"}', "\x00json:[1]", [{"type": "text", "text": "x"}]]
    with SessionDB(source) as db:
        db.create_session("s", "cli")
        for content in contents:
            db.append_message("s", "user", content)
    copy_store(create_engine(source), create_engine(pg_url))  # verified on the way
    copy_store(create_engine(pg_url), create_engine(back))
    for store in (SessionDB(url=pg_url), SessionDB(back)):
        with store as db:
            assert [m["content"] for m in db.get_messages("s")] == contents
