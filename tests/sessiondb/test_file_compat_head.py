"""One state.db, two programs, the other being upstream Hermes at schema 17 (its newest commit).

The real upstream ``hermes_state.py`` at ``benchmarks.upstream.HEAD_COMMIT`` (and at the v11
``COMMIT``) is extracted from the Hermes mirror and run against files ours creates, and
ours against files it creates:

* a file upstream created and wrote (gateway routing columns, platform message ids,
  observed messages, an in-place compaction's archived rows, a Telegram topic binding)
  is adopted by ours row for row, at schema_version 17, without upstream's data fixes
  being redone, and is migrated once only; ours then reads the live context, searches the
  archived rows and appends;
* a file ours created is opened by upstream: no migration error, nothing changed in its
  schema, schema_version still 17; upstream reads, appends, compacts and searches it, and
  ours sees what upstream wrote; upstream v11 still reads and appends to it;
* both programs create the same schema (upstream's opt-in Telegram tables included), and
  ``legacy_db.build_upstream_db`` builds that schema too.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import legacy_db
import pytest
from support import bench_upstream

from hermes_store import SessionDB
from hermes_store.schema.legacy import HEAD_VERSION
from hermes_store.schema.revisions import history

HEAD = history().head


def _load_upstream(commit_name: str, module_name: str) -> Any:
    upstream = bench_upstream()
    folder = upstream.upstream_folder(getattr(upstream, commit_name))
    if folder is None:
        pytest.skip("the Hermes mirror is not here; cannot run upstream")
    return upstream.upstream_session_db(folder, module_name=module_name)


@pytest.fixture(scope="module")
def upstream_head() -> Any:
    """Upstream's ``SessionDB`` class at schema 17."""
    return _load_upstream("HEAD_COMMIT", "upstream_hermes_state_head")


@pytest.fixture(scope="module")
def upstream_v11() -> Any:
    """Upstream's ``SessionDB`` class at schema 11."""
    return _load_upstream("COMMIT", "upstream_hermes_state_v11_compat")


def squash(sql: str | None) -> str:
    return re.sub(r"\s+", "", sql or "")


def schema_objects(path: Path) -> dict[tuple[str, str], str]:
    return {key: squash(sql) for key, sql in legacy_db.master(path).items()}


def table_shape(path: Path, table: str) -> dict[str, tuple[Any, ...]]:
    with closing(sqlite3.connect(str(path))) as conn:
        return {row[1]: tuple(row[2:]) for row in conn.execute(f"PRAGMA table_info({table})")}


def foreign_keys(path: Path, table: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(str(path))) as conn:
        return sorted(tuple(row[2:]) for row in conn.execute(f"PRAGMA foreign_key_list({table})"))


TABLES = (
    "sessions",
    "messages",
    "state_meta",
    "schema_version",
    "compression_locks",
    "telegram_dm_topic_mode",
    "telegram_dm_topic_bindings",
)
ALEMBIC_OBJECTS = {("table", "alembic_version"), ("index", "sqlite_autoindex_alembic_version_1")}


def assert_same_schema(ours: Path, theirs: Path) -> None:
    """The same objects (ours adds Alembic's table), the same index, trigger and FTS text,
    the same columns (types, NOT NULL, defaults, keys) and foreign keys."""
    mine, reference = schema_objects(ours), schema_objects(theirs)
    assert set(mine) - set(reference) <= ALEMBIC_OBJECTS
    assert set(reference) - set(mine) == set()
    for key in reference:
        kind, name = key
        if kind in ("index", "trigger") or name.startswith("messages_fts"):
            assert mine[key] == reference[key], key
    for table in TABLES:
        if ("table", table) not in reference:  # the topic tables: upstream's opt-in
            continue
        assert table_shape(ours, table) == table_shape(theirs, table), table
        assert foreign_keys(ours, table) == foreign_keys(theirs, table), table


def every_row(path: Path) -> dict[str, Any]:
    tables = ("sessions", "messages", "telegram_dm_topic_mode", "telegram_dm_topic_bindings", "state_meta")
    keys = {
        "telegram_dm_topic_mode": "chat_id",
        "telegram_dm_topic_bindings": "thread_id",
        "state_meta": "key",
    }
    return {table: legacy_db.read_rows(path, table, key=keys.get(table, "id")) for table in tables}


TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "terminal", "arguments": '{"cmd": "ls"}'},
}


def upstream_writes(store: Any) -> None:
    """What upstream's gateway and agent write: routed sessions, platform ids, observed
    group chatter, a delegate child, an in-place compaction and a Telegram topic."""
    store.create_session(
        "gw",
        "telegram",
        user_id="42",
        model="m",
        session_key="agent:main:telegram:dm:42",
        chat_id="42",
        chat_type="dm",
        thread_id="7",
        cwd="/srv/app",
    )
    store.append_message("gw", "user", "deploy the kubernetes cluster", platform_message_id="tg-1")
    store.append_message("gw", "assistant", None, tool_calls=[TOOL_CALL])
    store.append_message("gw", "tool", "pods ready 记忆断裂", tool_call_id="call_1", tool_name="terminal")
    store.append_message("gw", "user", "someone else's chatter", observed=True, platform_message_id="tg-2")
    store.create_session("sub", "delegate", parent_session_id="gw", model_config={"_delegate_from": "gw"})
    store.append_message("sub", "user", "subtask")
    store.archive_and_compact(
        "gw",
        [
            {"role": "user", "content": "summary of the deploy so far"},
            {"role": "assistant", "content": "continuing after compaction"},
        ],
    )
    store.apply_telegram_topic_migration()
    with closing(sqlite3.connect(str(store.db_path))) as conn:
        conn.execute(
            "INSERT INTO telegram_dm_topic_bindings (chat_id, thread_id, user_id, session_key, session_id, "
            "linked_at, updated_at) VALUES ('42', '7', '42', 'agent:main:telegram:dm:42', 'gw', 1.0, 2.0)"
        )
        conn.commit()


def test_a_file_upstream_head_wrote_is_adopted_row_for_row_once(
    tmp_path: Path, upstream_head: Any, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.db"
    upstream = upstream_head(path)
    upstream_writes(upstream)
    live = [m["id"] for m in upstream.get_messages("gw")]
    archived = [m["id"] for m in upstream.get_messages("gw", include_inactive=True) if m["id"] not in live]
    upstream.close()
    rows = every_row(path)
    assert legacy_db.schema_versions(path) == [17]
    with caplog.at_level(logging.WARNING):
        ours = SessionDB(path)
    try:
        assert any(
            "adopting legacy Hermes database (schema_version 17)" in r.getMessage() for r in caplog.records
        )
        assert every_row(path) == rows  # nothing re-migrated: no tag, no flag, no binding changed
        assert (legacy_db.schema_versions(path), legacy_db.alembic_versions(path)) == ([HEAD_VERSION], [HEAD])
        assert [m["id"] for m in ours.get_messages("gw")] == live
        assert [m["content"] for m in ours.get_messages("gw")] == [
            "summary of the deploy so far",
            "continuing after compaction",
        ]
        assert {m["id"] for m in ours.get_messages("gw", include_inactive=True)} == set(live) | set(archived)
        # The archived originals stay searchable; the compacted copies are found too.
        assert {hit["id"] for hit in ours.search_messages("kubernetes")} == {archived[0]}
        assert [hit["id"] for hit in ours.search_messages("记忆断裂")] == [archived[2]]
        session = ours.get_session("gw")
        assert (session["session_key"], session["chat_type"], session["cwd"]) == (  # type: ignore[index]
            "agent:main:telegram:dm:42",
            "dm",
            "/srv/app",
        )
        written = ours.append_message("gw", "user", "written by ours afterwards")
        assert [hit["id"] for hit in ours.search_messages("afterwards")] == [written]
    finally:
        ours.close()
    objects = schema_objects(path)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        SessionDB(path).close()
    assert not [r for r in caplog.records if "adopting" in r.getMessage()]
    assert schema_objects(path) == objects
    for table in ("messages_fts", "messages_fts_trigram"):
        legacy_db.fts_integrity_check(path, table)


def ours_writes(path: Path) -> None:
    with SessionDB(path) as ours:
        ours.create_session("ours", "cli", model="m", model_config={"persona": "助手"})
        ours.append_message("ours", "user", "plan the kubernetes upgrade 数据库迁移")
        ours.append_message("ours", "assistant", "first drain the nodes", tool_calls=[TOOL_CALL])
        ours.set_session_title("ours", "Upgrade plan")


def test_a_file_ours_created_is_used_by_upstream_head_unchanged(tmp_path: Path, upstream_head: Any) -> None:
    path = tmp_path / "state.db"
    ours_writes(path)
    with SessionDB(path) as ours:
        ours.apply_telegram_topic_migration()  # topic mode's opt-in, done by ours
    objects = schema_objects(path)
    upstream = upstream_head(path)
    try:
        assert schema_objects(path) == objects  # no migration, no FTS rebuild
        assert legacy_db.schema_versions(path) == [17]
        assert [m["content"] for m in upstream.get_messages("ours")] == [
            "plan the kubernetes upgrade 数据库迁移",
            "first drain the nodes",
        ]
        assert upstream.get_session("ours")["title"] == "Upgrade plan"
        theirs = upstream.append_message(
            "ours", "user", "upstream asks about pods", platform_message_id="p-1"
        )
        assert upstream.has_platform_message_id("ours", "p-1")
        assert {hit["id"] for hit in upstream.search_messages("kubernetes")} == {1}
        assert [hit["id"] for hit in upstream.search_messages("数据库迁移")] == [1]
        upstream.archive_and_compact("ours", [{"role": "user", "content": "compacted summary"}])
        upstream.apply_telegram_topic_migration()  # ours created the second shape
    finally:
        upstream.close()
    assert legacy_db.schema_versions(path) == [17]
    assert schema_objects(path) == objects
    with SessionDB(path) as ours:
        assert [m["content"] for m in ours.get_messages("ours")] == ["compacted summary"]
        everything = ours.get_messages("ours", include_inactive=True)
        assert [m["id"] for m in everything][:3] == [1, 2, theirs]
        assert {hit["id"] for hit in ours.search_messages("pods")} == {theirs}


def test_upstream_v11_still_reads_and_appends_to_a_file_ours_created(
    tmp_path: Path, upstream_v11: Any, upstream_head: Any
) -> None:
    path = tmp_path / "state.db"
    ours_writes(path)
    objects = schema_objects(path)
    old = upstream_v11(path)
    try:
        first = old.get_messages("ours")[0]
        assert first["content"] == "plan the kubernetes upgrade 数据库迁移"
        appended = old.append_message("ours", "user", "v11 writes a zeppelin line")
        assert [hit["id"] for hit in old.search_messages("zeppelin")] == [appended]
    finally:
        old.close()
    assert legacy_db.schema_versions(path) == [17]  # never written lower
    assert schema_objects(path) == objects
    with SessionDB(path) as ours:
        row = next(m for m in ours.get_messages("ours") if m["id"] == appended)
        assert (row["active"], row["compacted"]) == (1, 0)
        assert [hit["id"] for hit in ours.search_messages("zeppelin")] == [appended]
    head = upstream_head(path)
    try:
        assert [m["id"] for m in head.get_messages("ours")][-1] == appended
    finally:
        head.close()


def topic_tables(path: Path) -> list[str]:
    with closing(sqlite3.connect(str(path))) as conn:
        found = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'telegram_dm%'"
        )
        return sorted(str(name) for (name,) in found)


def meta_rows(path: Path) -> list[list[str]]:
    with closing(sqlite3.connect(str(path))) as conn:
        return json.loads(json.dumps(conn.execute("SELECT key, value FROM state_meta").fetchall()))


def test_both_programs_and_the_builder_create_the_same_schema(tmp_path: Path, upstream_head: Any) -> None:
    theirs = tmp_path / "upstream.db"
    upstream_head(theirs).close()
    ours = tmp_path / "ours.db"
    SessionDB(ours).close()
    # Neither program creates the Telegram topic tables before topic mode is used.
    assert topic_tables(ours) == topic_tables(theirs) == []
    assert meta_rows(ours) == meta_rows(theirs) == []
    assert_same_schema(ours, theirs)
    upstream = upstream_head(theirs)
    upstream.apply_telegram_topic_migration()
    upstream.close()
    with SessionDB(ours) as store:
        store.apply_telegram_topic_migration()
    assert_same_schema(ours, theirs)
    built = tmp_path / "built.db"
    legacy_db.build_upstream_db(built, 17, topic_tables=2)
    assert_same_schema(built, theirs)
    assert meta_rows(ours) == meta_rows(theirs) == [["telegram_dm_topic_schema_version", "2"]]


def test_upstream_reads_a_file_ours_created_without_topic_tables_and_leaves_it_so(
    tmp_path: Path, upstream_head: Any
) -> None:
    path = tmp_path / "state.db"
    with SessionDB(path) as ours:
        ours.create_session("tg", "telegram", user_id="42")
        assert ours.list_telegram_topic_bindings_for_chat(chat_id=42) == []
    upstream = upstream_head(path)
    try:
        assert upstream.is_telegram_topic_mode_enabled(chat_id="42", user_id="42") is False
        assert upstream.list_telegram_topic_bindings_for_chat(chat_id="42") == []
        assert [
            s["id"] for s in upstream.list_unlinked_telegram_sessions_for_user(chat_id="42", user_id="42")
        ] == ["tg"]
    finally:
        upstream.close()
    assert topic_tables(path) == []
    upstream = upstream_head(path)
    try:
        upstream.bind_telegram_topic(
            chat_id="42", thread_id="7", user_id="42", session_key="k", session_id="tg"
        )
    finally:
        upstream.close()
    with SessionDB(path) as ours:
        assert ours.is_telegram_session_linked_to_topic(session_id="tg") is True
        assert ours.list_unlinked_telegram_sessions_for_user(chat_id=42, user_id=42) == []
