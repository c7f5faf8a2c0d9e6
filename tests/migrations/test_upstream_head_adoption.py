"""Adopting files upstream Hermes wrote at schema versions 12–17, ragged ones too.

Files are built by ``legacy_db.build_upstream_db`` (plain sqlite3, upstream's later steps
in the order they landed) and adopted in process (``ensure_schema``) and by the real
``alembic`` command: every row is kept (columns upstream later dropped included),
schema_version ends at 17 and is never written lower on the way, upstream's v16 tagging of
delegate sessions runs only for files below 16 and never tags ordinary conversations, and
a Telegram bindings table of upstream's first shape is rebuilt with ``ON DELETE CASCADE``.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from legacy_db import (
    GHOST_COLUMNS,
    alembic_versions,
    build_upstream_db,
    connect,
    default_messages,
    default_sessions,
    fts_integrity_check,
    fts_rowids,
    master,
    populate,
    read_rows,
    restrict,
    schema_versions,
)
from support import run_alembic

from hermes_store import SessionDB
from hermes_store.db.engine import create_engine
from hermes_store.schema import migrate
from hermes_store.schema.legacy import HEAD_VERSION
from hermes_store.schema.revisions import history

HEAD = history().head
SESSION_COLUMNS = 41
MESSAGE_COLUMNS = 19

# Sessions around the delegate tagging, beside legacy_db's defaults (whose second session
# continues a root that ended by compression).
LINEAGE_SESSIONS: list[dict[str, Any]] = [
    {"id": "untitled-tool-chat", "source": "telegram", "started_at": 1772500000.0},
    {"id": "parent", "source": "cli", "started_at": 1772500100.0, "title": "Parent"},
    {"id": "delegate", "source": "cli", "started_at": 1772500200.0, "parent_session_id": "parent"},
    {
        "id": "configured-delegate",
        "source": "cli",
        "started_at": 1772500210.0,
        "parent_session_id": "parent",
        "model_config": {"temperature": 0.1},
    },
    {
        "id": "marked-branch",
        "source": "tui",
        "started_at": 1772500220.0,
        "parent_session_id": "parent",
        "model_config": {"_branched_from": "parent"},
    },
    {
        "id": "odd-config",
        "source": "cli",
        "started_at": 1772500230.0,
        "parent_session_id": "parent",
        "model_config": "not json at all",
    },
    {
        "id": "branched-parent",
        "source": "cli",
        "started_at": 1772500300.0,
        "ended_at": 1772500400.0,
        "end_reason": "branched",
    },
    {"id": "branch", "source": "cli", "started_at": 1772500400.5, "parent_session_id": "branched-parent"},
    {
        "id": "early-child",
        "source": "cli",
        "started_at": 1772500350.0,
        "parent_session_id": "branched-parent",
    },
]
LINEAGE_MESSAGES: list[dict[str, Any]] = [
    {
        "session_id": "untitled-tool-chat",
        "role": "tool",
        "content": "ls output",
        "tool_name": "terminal",
        "timestamp": 1772500001.0,
    },
    {"session_id": "delegate", "role": "user", "content": "subtask", "timestamp": 1772500201.0},
]
TAGGED = {"delegate": "parent", "configured-delegate": "parent", "early-child": "branched-parent"}
"""The sessions a file below 16 gets tagged, with the parent they name."""


def adopt(path: Path, how: str = "ensure_schema") -> None:
    if how == "ensure_schema":
        engine = create_engine(path)
        try:
            migrate.ensure_schema(engine)
        finally:
            engine.dispose()
    else:
        run_alembic(path, "upgrade", "head")


def columns(path: Path, table: str) -> list[str]:
    with closing(sqlite3.connect(str(path))) as conn:
        return [str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")]


def snapshot(path: Path) -> dict[str, dict[Any, dict[str, tuple[str, Any]]]]:
    return {t: read_rows(path, t) for t in ("sessions", "messages")}


def assert_rows_kept(
    path: Path, before: dict[str, dict[Any, dict[str, tuple[str, Any]]]], *, but: set[str]
) -> None:
    """Same rows, every column that existed before unchanged, except the sessions in ``but``
    (their ``model_config`` gained a tag)."""
    for table in ("sessions", "messages"):
        after = read_rows(path, table)
        assert set(after) == set(before[table]), table
        old_columns = set(next(iter(before[table].values())))
        kept = restrict(after, old_columns)
        if table == "sessions":
            for sid in but:
                kept[sid].pop("model_config")
                before[table][sid] = dict(before[table][sid])
                before[table][sid].pop("model_config")
        assert kept == before[table], table


def model_configs(path: Path) -> dict[str, Any]:
    with closing(sqlite3.connect(str(path))) as conn:
        rows = conn.execute("SELECT id, model_config FROM sessions").fetchall()
    parsed: dict[str, Any] = {}
    for sid, config in rows:
        try:
            parsed[str(sid)] = None if config is None else json.loads(config)
        except ValueError:
            parsed[str(sid)] = config
    return parsed


def later_rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rows that use upstream's later columns (written only where the file has them)."""
    sessions = [
        *default_sessions(),
        {
            "id": "gateway",
            "source": "telegram",
            "user_id": "424242",
            "started_at": 1772600000.0,
            "session_key": "agent:main:telegram:dm:424242",
            "chat_id": "424242",
            "chat_type": "dm",
            "thread_id": "17",
            "cwd": "/home/u/project",
            "git_branch": "main",
            "handoff_state": "completed",
            "archived": 1,
            "rewind_count": 2,
            "handoff_pending": 1,
            "icon": "rocket",
        },
    ]
    messages = [
        *default_messages(),
        {
            "session_id": "gateway",
            "role": "user",
            "content": "archived original about kubernetes",
            "timestamp": 1772600001.0,
            "platform_message_id": "tg-9001",
            "observed": 1,
            "active": 0,
            "compacted": 1,
            "anthropic_content_blocks": '[{"type": "text"}]',
        },
    ]
    return sessions, messages


# --- every later version ---------------------------------------------------------------------

CASES = [(version, "ensure_schema") for version in range(12, 18)] + [
    (14, "alembic upgrade head"),
    (17, "alembic upgrade head"),
]


@pytest.mark.parametrize(("version", "how"), CASES)
def test_upstream_file_of_every_later_version_is_adopted_with_every_row_kept(
    tmp_path: Path, version: int, how: str
) -> None:
    path = tmp_path / "state.db"
    build_upstream_db(path, version, ghosts=True)
    sessions, messages = later_rows()
    written = populate(path, sessions=sessions, messages=messages)
    before = snapshot(path)
    adopt(path, how)
    assert (schema_versions(path), alembic_versions(path)) == ([HEAD_VERSION], [HEAD])
    assert_rows_kept(path, before, but=set())
    ghosts = len(GHOST_COLUMNS)
    assert len(columns(path, "sessions")) == SESSION_COLUMNS + ghosts - 1
    assert len(columns(path, "messages")) == MESSAGE_COLUMNS + 1
    rows = read_rows(path, "messages")
    archived = rows[written.messages[-1]["id"]]
    flags = (archived["active"][1], archived["compacted"][1])
    if version >= 16:  # the file had both flags: upstream's archived copy stays archived
        assert flags == (0, 1)
    elif version >= 14:  # it had ``active`` only: the row was taken out of the context
        assert flags == (0, 0)
    else:  # the flags arrive with their defaults: the message is live
        assert flags == (1, 0)
    for table in ("messages_fts", "messages_fts_trigram"):
        fts_integrity_check(path, table)
        assert fts_rowids(path, table, "kubernetes") == [
            written.messages[0]["id"],
            written.messages[-1]["id"],
        ]
    objects = master(path)
    for index in ("idx_messages_session_active", "idx_sessions_gateway_peer"):
        assert ("index", index) in objects
    # Nobody opted in to Telegram topic mode: the file stays without its tables.
    assert not [name for _, name in objects if name.startswith(("telegram_dm", "idx_telegram_dm"))]


def test_a_v14_file_opened_before_cwd_and_active_existed_gains_them(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    build_upstream_db(path, 14, missing=("cwd", "active"))
    assert "active" not in columns(path, "messages") and "cwd" not in columns(path, "sessions")
    populate(path)
    before = snapshot(path)
    adopt(path)
    assert "cwd" in columns(path, "sessions") and "rewind_count" in columns(path, "sessions")
    assert {row["active"] for row in read_rows(path, "messages").values()} == {("integer", 1)}
    assert ("index", "idx_messages_session_active") in master(path)
    assert_rows_kept(path, before, but=set())
    assert schema_versions(path) == [HEAD_VERSION]


def test_our_store_reads_and_writes_a_file_holding_upstreams_dropped_columns(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    build_upstream_db(path, 17, ghosts=True)
    sessions, messages = later_rows()
    populate(path, sessions=sessions, messages=messages)
    with SessionDB(path) as db:
        assert db.get_session("gateway")["session_key"] == "agent:main:telegram:dm:424242"  # type: ignore[index]
        db.append_message("gateway", "assistant", "a reply")
        db.create_session("new", "cli")
        assert [m["content"] for m in db.get_messages("gateway", include_inactive=True)][-1] == "a reply"
    rows = read_rows(path, "sessions")
    assert (rows["gateway"]["handoff_pending"], rows["gateway"]["icon"]) == (
        ("integer", 1),
        ("text", "rocket"),
    )
    assert (rows["new"]["handoff_pending"], rows["new"]["icon"]) == (("integer", 0), ("null", None))
    message_rows = read_rows(path, "messages")
    assert {row["anthropic_content_blocks"] for row in message_rows.values()} == {
        ("text", '[{"type": "text"}]'),
        ("null", None),
    }


# --- the delegate tagging ------------------------------------------------------------------


@pytest.mark.parametrize("version", [11, 14, 15])
def test_a_file_below_16_gets_upstreams_delegate_tags_and_no_orphan_tags(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / "state.db"
    build_upstream_db(path, version)
    populate(
        path,
        sessions=[*default_sessions(), *LINEAGE_SESSIONS],
        messages=[*default_messages(), *LINEAGE_MESSAGES],
    )
    configs_before = model_configs(path)
    before = snapshot(path)
    adopt(path)
    configs = model_configs(path)
    expected = dict(configs_before)
    for child, parent in TAGGED.items():
        expected[child] = {**(configs_before[child] or {}), "_delegate_from": parent}
    assert configs == expected
    # Untouched: the compression continuation, both branches, the text that is not JSON,
    # and the untitled root with a tool message (upstream would hide it as "__orphaned__").
    assert configs["untitled-tool-chat"] is None
    assert_rows_kept(path, before, but=set(TAGGED))


@pytest.mark.parametrize("version", [16, 17])
def test_a_file_upstream_brought_to_16_is_not_tagged_again(tmp_path: Path, version: int) -> None:
    path = tmp_path / "state.db"
    build_upstream_db(path, version)
    populate(
        path,
        sessions=[*default_sessions(), *LINEAGE_SESSIONS],
        messages=[*default_messages(), *LINEAGE_MESSAGES],
    )
    before = snapshot(path)
    adopt(path)
    assert_rows_kept(path, before, but=set())


def test_the_alembic_command_never_writes_a_lower_schema_version(tmp_path: Path) -> None:
    """Each revision commits on its own: between them, upstream may open the file, and
    would redo its v12 and v16 fixes on a number below 16."""
    path = tmp_path / "state.db"
    build_upstream_db(path, 14)
    populate(
        path,
        sessions=[*default_sessions(), *LINEAGE_SESSIONS],
        messages=[*default_messages(), *LINEAGE_MESSAGES],
    )
    run_alembic(path, "upgrade", "0012")
    assert (alembic_versions(path), schema_versions(path)) == (["0012"], [14])
    run_alembic(path, "upgrade", "0018")
    assert schema_versions(path) == [14]
    run_alembic(path, "upgrade", "head")
    assert (alembic_versions(path), schema_versions(path)) == ([HEAD], [HEAD_VERSION])
    assert {sid: config for sid, config in model_configs(path).items() if sid in TAGGED} == {
        child: {"_delegate_from": parent}
        for child, parent in TAGGED.items()
        if child != "configured-delegate"
    } | {"configured-delegate": {"temperature": 0.1, "_delegate_from": "parent"}}


# --- Telegram topic tables -----------------------------------------------------------------


def bindings_file(path: Path, shape: int) -> None:
    build_upstream_db(path, 17, topic_tables=shape)
    populate(path)
    with closing(connect(path)) as conn:
        conn.execute(
            "INSERT INTO telegram_dm_topic_mode (chat_id, user_id, activated_at, updated_at) "
            "VALUES ('424242', '424242', 1.0, 2.0)"
        )
        conn.execute(
            "INSERT INTO telegram_dm_topic_bindings (chat_id, thread_id, user_id, session_key, session_id, "
            "linked_at, updated_at) VALUES ('424242', '17', '424242', 'k', 'tg-1772400000', 1.0, 2.0)"
        )
        conn.execute("PRAGMA foreign_keys=OFF")  # a writer without foreign keys left this one
        conn.execute(
            "INSERT INTO telegram_dm_topic_bindings (chat_id, thread_id, user_id, session_key, session_id, "
            "linked_at, updated_at) VALUES ('424242', '18', '424242', 'k2', 'gone', 1.0, 2.0)"
        )


def foreign_keys(path: Path, table: str) -> list[tuple[str, str, str]]:
    with closing(sqlite3.connect(str(path))) as conn:
        return [(str(r[2]), str(r[3]), str(r[6])) for r in conn.execute(f"PRAGMA foreign_key_list({table})")]


def test_a_first_shape_bindings_table_is_rebuilt_with_cascade_keeping_its_bindings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.db"
    bindings_file(path, shape=1)
    assert foreign_keys(path, "telegram_dm_topic_bindings") == [("sessions", "session_id", "NO ACTION")]
    with caplog.at_level(logging.WARNING):
        adopt(path)
    assert foreign_keys(path, "telegram_dm_topic_bindings") == [("sessions", "session_id", "CASCADE")]
    bindings = read_rows(path, "telegram_dm_topic_bindings", key="thread_id")
    assert set(bindings) == {"17"}  # the binding to a deleted session routed nowhere
    assert bindings["17"]["session_id"] == ("text", "tg-1772400000")
    assert any("binding(s) whose session no longer exists" in r.getMessage() for r in caplog.records)
    assert set(read_rows(path, "telegram_dm_topic_mode", key="chat_id")) == {"424242"}
    objects = master(path)
    assert ("index", "idx_telegram_dm_topic_bindings_session") in objects
    assert ("table", "telegram_dm_topic_bindings_rebuilt") not in objects
    with closing(sqlite3.connect(str(path))) as conn:
        meta = conn.execute("SELECT value FROM state_meta WHERE key = 'telegram_dm_topic_schema_version'")
        assert meta.fetchone() == ("2",)
        # The cascade works: deleting the session takes its binding.
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("DELETE FROM messages WHERE session_id = 'tg-1772400000'")
        conn.execute("DELETE FROM sessions WHERE id = 'tg-1772400000'")
        conn.commit()
        assert conn.execute("SELECT count(*) FROM telegram_dm_topic_bindings").fetchone() == (0,)


def test_a_second_shape_bindings_table_is_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    bindings_file(path, shape=2)
    sql = master(path)[("table", "telegram_dm_topic_bindings")]
    adopt(path)
    assert master(path)[("table", "telegram_dm_topic_bindings")] == sql
    assert set(read_rows(path, "telegram_dm_topic_bindings", key="thread_id")) == {"17", "18"}
    assert set(read_rows(path, "telegram_dm_topic_mode", key="chat_id")) == {"424242"}
    assert ("index", "idx_telegram_dm_topic_bindings_user") in master(path)
    with SessionDB(path) as db:
        assert db.is_telegram_topic_mode_enabled(chat_id="424242", user_id="424242")
        assert db.get_telegram_topic_binding(chat_id="424242", thread_id="17") is not None
