"""Invariants of the Alembic history on SQLite.

A database at head must be upstream Hermes' schema-17 ``state.db`` in meaning (tables,
columns, types, defaults, indexes, inline FTS5 tables, triggers), plus ``alembic_version``
(columns upstream added after creating a table sit at its end, as in every file upstream
upgraded); every
revision steps down and up again keeping every row and keeping ``schema_version`` in
step; offline SQL carries the ``schema_version`` shim; ``alembic check`` sees no drift;
and a legacy v1 file upgraded to head ends with the same catalogue as an empty one.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest
from legacy_db import (
    alembic_versions,
    build_legacy_db,
    fts_integrity_check,
    fts_rowids,
    master,
    populate,
    read_rows,
    restrict,
    schema_versions,
)

from hermes_store import SessionDB
from hermes_store.db.engine import create_engine
from hermes_store.schema import migrate
from hermes_store.schema.legacy import HEAD_VERSION
from hermes_store.schema.revisions import history

HEAD = history().head

FTS_TABLES = ("messages_fts", "messages_fts_trigram")

# --- expected schema ---------------------------------------------------------------------

# (type, not null, default, primary key) of each column, as PRAGMA table_info reports them.
SESSIONS_COLUMNS = {
    "id": ("TEXT", 0, None, 1),
    "source": ("TEXT", 1, None, 0),
    "user_id": ("TEXT", 0, None, 0),
    "model": ("TEXT", 0, None, 0),
    "model_config": ("TEXT", 0, None, 0),
    "system_prompt": ("TEXT", 0, None, 0),
    "parent_session_id": ("TEXT", 0, None, 0),
    "started_at": ("REAL", 1, None, 0),
    "ended_at": ("REAL", 0, None, 0),
    "end_reason": ("TEXT", 0, None, 0),
    "message_count": ("INTEGER", 0, "0", 0),
    "tool_call_count": ("INTEGER", 0, "0", 0),
    "input_tokens": ("INTEGER", 0, "0", 0),
    "output_tokens": ("INTEGER", 0, "0", 0),
    "cache_read_tokens": ("INTEGER", 0, "0", 0),
    "cache_write_tokens": ("INTEGER", 0, "0", 0),
    "reasoning_tokens": ("INTEGER", 0, "0", 0),
    "billing_provider": ("TEXT", 0, None, 0),
    "billing_base_url": ("TEXT", 0, None, 0),
    "billing_mode": ("TEXT", 0, None, 0),
    "estimated_cost_usd": ("REAL", 0, None, 0),
    "actual_cost_usd": ("REAL", 0, None, 0),
    "cost_status": ("TEXT", 0, None, 0),
    "cost_source": ("TEXT", 0, None, 0),
    "pricing_version": ("TEXT", 0, None, 0),
    "title": ("TEXT", 0, None, 0),
    "api_call_count": ("INTEGER", 0, "0", 0),
    # upstream's schema 12-17 (revision 0019)
    "session_key": ("TEXT", 0, None, 0),
    "chat_id": ("TEXT", 0, None, 0),
    "chat_type": ("TEXT", 0, None, 0),
    "thread_id": ("TEXT", 0, None, 0),
    "cwd": ("TEXT", 0, None, 0),
    "git_branch": ("TEXT", 0, None, 0),
    "git_repo_root": ("TEXT", 0, None, 0),
    "handoff_state": ("TEXT", 0, None, 0),
    "handoff_platform": ("TEXT", 0, None, 0),
    "handoff_error": ("TEXT", 0, None, 0),
    "compression_failure_cooldown_until": ("REAL", 0, None, 0),
    "compression_failure_error": ("TEXT", 0, None, 0),
    "rewind_count": ("INTEGER", 1, "0", 0),
    "archived": ("INTEGER", 1, "0", 0),
}
MESSAGES_COLUMNS = {
    "id": ("INTEGER", 0, None, 1),
    "session_id": ("TEXT", 1, None, 0),
    "role": ("TEXT", 1, None, 0),
    "content": ("TEXT", 0, None, 0),
    "tool_call_id": ("TEXT", 0, None, 0),
    "tool_calls": ("TEXT", 0, None, 0),
    "tool_name": ("TEXT", 0, None, 0),
    "timestamp": ("REAL", 1, None, 0),
    "token_count": ("INTEGER", 0, None, 0),
    "finish_reason": ("TEXT", 0, None, 0),
    "reasoning": ("TEXT", 0, None, 0),
    "reasoning_content": ("TEXT", 0, None, 0),
    "reasoning_details": ("TEXT", 0, None, 0),
    "codex_reasoning_items": ("TEXT", 0, None, 0),
    "codex_message_items": ("TEXT", 0, None, 0),
    "platform_message_id": ("TEXT", 0, None, 0),
    "observed": ("INTEGER", 0, "0", 0),
    "active": ("INTEGER", 1, "1", 0),
    "compacted": ("INTEGER", 1, "0", 0),
}
STATE_META_COLUMNS = {"key": ("TEXT", 0, None, 1), "value": ("TEXT", 0, None, 0)}
COMPRESSION_LOCKS_COLUMNS = {
    "session_id": ("TEXT", 0, None, 1),
    "holder": ("TEXT", 1, None, 0),
    "acquired_at": ("REAL", 1, None, 0),
    "expires_at": ("REAL", 1, None, 0),
}
TOPIC_MODE_COLUMNS = {
    "chat_id": ("TEXT", 0, None, 1),
    "user_id": ("TEXT", 1, None, 0),
    "enabled": ("INTEGER", 1, "1", 0),
    "activated_at": ("REAL", 1, None, 0),
    "updated_at": ("REAL", 1, None, 0),
    "has_topics_enabled": ("INTEGER", 0, None, 0),
    "allows_users_to_create_topics": ("INTEGER", 0, None, 0),
    "capability_checked_at": ("REAL", 0, None, 0),
    "intro_message_id": ("TEXT", 0, None, 0),
    "pinned_message_id": ("TEXT", 0, None, 0),
}
TOPIC_BINDINGS_COLUMNS = {
    "chat_id": ("TEXT", 1, None, 1),
    "thread_id": ("TEXT", 1, None, 2),
    "user_id": ("TEXT", 1, None, 0),
    "session_key": ("TEXT", 1, None, 0),
    "session_id": ("TEXT", 1, None, 0),
    "managed_mode": ("TEXT", 1, "'auto'", 0),
    "linked_at": ("REAL", 1, None, 0),
    "updated_at": ("REAL", 1, None, 0),
}
SCHEMA_VERSION_COLUMNS = {"version": ("INTEGER", 1, None, 0)}

TRIGGERS = {
    "messages_fts_insert",
    "messages_fts_delete",
    "messages_fts_update",
    "messages_fts_trigram_insert",
    "messages_fts_trigram_delete",
    "messages_fts_trigram_update",
}

_TEXT = (
    "COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' ' || COALESCE(new.tool_calls, '')"
)
EXPECTED_FTS_SQL = {
    "messages_fts": "CREATE VIRTUAL TABLE messages_fts USING fts5( content )",
    "messages_fts_trigram": (
        "CREATE VIRTUAL TABLE messages_fts_trigram USING fts5( content, tokenize='trigram' )"
    ),
}
EXPECTED_TRIGGER_SQL: dict[str, str] = {}
for _t in FTS_TABLES:
    _insert = f"INSERT INTO {_t}(rowid, content) VALUES ( new.id, {_TEXT} );"
    EXPECTED_TRIGGER_SQL[f"{_t}_insert"] = (
        f"CREATE TRIGGER {_t}_insert AFTER INSERT ON messages BEGIN {_insert} END"
    )
    EXPECTED_TRIGGER_SQL[f"{_t}_delete"] = (
        f"CREATE TRIGGER {_t}_delete AFTER DELETE ON messages BEGIN "
        f"DELETE FROM {_t} WHERE rowid = old.id; END"
    )
    EXPECTED_TRIGGER_SQL[f"{_t}_update"] = (
        f"CREATE TRIGGER {_t}_update AFTER UPDATE ON messages BEGIN "
        f"DELETE FROM {_t} WHERE rowid = old.id; {_insert} END"
    )

EXPECTED_INDEX_SQL = {
    "idx_sessions_source": ("sessions", "CREATE INDEX idx_sessions_source ON sessions(source)"),
    "idx_sessions_parent": ("sessions", "CREATE INDEX idx_sessions_parent ON sessions(parent_session_id)"),
    "idx_sessions_started": ("sessions", "CREATE INDEX idx_sessions_started ON sessions(started_at DESC)"),
    "idx_messages_session": (
        "messages",
        "CREATE INDEX idx_messages_session ON messages(session_id, timestamp)",
    ),
    "idx_sessions_title_unique": (
        "sessions",
        "CREATE UNIQUE INDEX idx_sessions_title_unique ON sessions(title) WHERE title IS NOT NULL",
    ),
    "idx_sessions_source_id": ("sessions", "CREATE INDEX idx_sessions_source_id ON sessions (source, id)"),
    "idx_sessions_session_key": (
        "sessions",
        "CREATE INDEX idx_sessions_session_key ON sessions (session_key, started_at DESC)",
    ),
    "idx_sessions_gateway_peer": (
        "sessions",
        "CREATE INDEX idx_sessions_gateway_peer "
        "ON sessions (source, user_id, chat_id, chat_type, thread_id, started_at DESC)",
    ),
    "idx_sessions_handoff_state": (
        "sessions",
        "CREATE INDEX idx_sessions_handoff_state ON sessions (handoff_state, started_at)",
    ),
    "idx_messages_session_active": (
        "messages",
        "CREATE INDEX idx_messages_session_active ON messages (session_id, active, timestamp)",
    ),
    "idx_messages_platform_msg_id": (
        "messages",
        "CREATE INDEX idx_messages_platform_msg_id ON messages (session_id, platform_message_id) "
        "WHERE platform_message_id IS NOT NULL",
    ),
    "idx_compression_locks_expires": (
        "compression_locks",
        "CREATE INDEX idx_compression_locks_expires ON compression_locks (expires_at)",
    ),
}
TOPIC_INDEX_SQL = {
    "idx_telegram_dm_topic_bindings_session": (
        "telegram_dm_topic_bindings",
        "CREATE UNIQUE INDEX idx_telegram_dm_topic_bindings_session "
        "ON telegram_dm_topic_bindings (session_id)",
    ),
    "idx_telegram_dm_topic_bindings_user": (
        "telegram_dm_topic_bindings",
        "CREATE INDEX idx_telegram_dm_topic_bindings_user ON telegram_dm_topic_bindings (user_id, chat_id)",
    ),
}
NEW_TABLES = ("compression_locks",)
TOPIC_TABLES = ("telegram_dm_topic_mode", "telegram_dm_topic_bindings")
"""Created on SQLite only when topic mode is first used, as upstream does."""

SHADOW_SUFFIXES = ("data", "idx", "content", "docsize", "config")
EXPECTED_TABLES = {
    "alembic_version",
    "schema_version",
    "sessions",
    "messages",
    "state_meta",
    "sqlite_sequence",
    *NEW_TABLES,
    *FTS_TABLES,
    *(f"{t}_{s}" for t in FTS_TABLES for s in SHADOW_SUFFIXES),
}


def normalise_sql(sql: str) -> str:
    """Whitespace-insensitive form of a DDL statement (keeps case and literals)."""
    collapsed = re.sub(r"\s+", " ", sql.strip())
    collapsed = re.sub(r"\s*([(),;])\s*", r"\1", collapsed)
    return collapsed.replace("IF NOT EXISTS ", "")


def table_info(path: Path, table: str) -> dict[str, tuple[str, int, str | None, int]]:
    with closing(sqlite3.connect(str(path))) as conn:
        return {
            str(r[1]): (str(r[2]), int(r[3]), r[4], int(r[5]))
            for r in conn.execute(f'PRAGMA table_info("{table}")')
        }


def query(path: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(str(path))) as conn:
        return [tuple(r) for r in conn.execute(sql, params)]


# --- a fresh database at head, made both ways --------------------------------------------


@pytest.fixture(scope="module")
def head_templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Empty databases brought to head by the real alembic CLI and by ensure_schema."""
    from support import run_alembic

    base = tmp_path_factory.mktemp("head")
    via_cli = base / "cli.db"
    run_alembic(via_cli, "upgrade", "head")
    via_api = base / "api.db"
    engine = create_engine(via_api)
    try:
        migrate.ensure_schema(engine)
    finally:
        engine.dispose()
    return {"alembic upgrade head": via_cli, "ensure_schema": via_api}


@pytest.fixture(params=["alembic upgrade head", "ensure_schema"])
def head_db(request: pytest.FixtureRequest, head_templates: dict[str, Path], tmp_path: Path) -> Path:
    """A private copy of a fresh database at head."""
    target = tmp_path / "state.db"
    shutil.copyfile(head_templates[request.param], target)
    return target


# --- structure at head -------------------------------------------------------------------


def test_head_has_exactly_upstreams_objects_plus_alembic_version(head_db: Path) -> None:
    objects = master(head_db)
    tables = {name for kind, name in objects if kind == "table"}
    indexes = {name for kind, name in objects if kind == "index"}
    triggers = {name for kind, name in objects if kind == "trigger"}
    assert tables == EXPECTED_TABLES
    assert indexes == {
        *EXPECTED_INDEX_SQL,
        "sqlite_autoindex_sessions_1",
        "sqlite_autoindex_state_meta_1",
        "sqlite_autoindex_alembic_version_1",
        *(f"sqlite_autoindex_{table}_1" for table in NEW_TABLES),
    }
    assert triggers == TRIGGERS
    assert {kind for kind, _ in objects} == {"table", "index", "trigger"}


def test_the_six_fts_triggers_all_fire_on_messages(head_db: Path) -> None:
    rows = query(head_db, "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger'")
    assert dict(rows) == dict.fromkeys(TRIGGERS, "messages")


def test_trigger_definitions_index_content_tool_name_and_tool_calls(head_db: Path) -> None:
    objects = master(head_db)
    actual = {name: normalise_sql(objects[("trigger", name)]) for name in TRIGGERS}
    assert actual == {name: normalise_sql(sql) for name, sql in EXPECTED_TRIGGER_SQL.items()}


def test_both_fts_tables_are_inline_with_one_content_column(head_db: Path) -> None:
    objects = master(head_db)
    for table in FTS_TABLES:
        assert normalise_sql(objects[("table", table)]) == normalise_sql(EXPECTED_FTS_SQL[table])
        assert list(table_info(head_db, table)) == ["content"]
        # Inline tables keep their own copy of the text; external-content ones have no _content.
        assert ("table", f"{table}_content") in objects
    assert "tokenize='trigram'" in objects[("table", "messages_fts_trigram")]
    assert "tokenize" not in objects[("table", "messages_fts")]


def test_indexes_match_upstream_including_partial_unique_title_index(head_db: Path) -> None:
    objects = master(head_db)
    for name, (table, sql) in EXPECTED_INDEX_SQL.items():
        assert normalise_sql(objects[("index", name)]) == normalise_sql(sql), name
        assert query(head_db, "SELECT tbl_name FROM sqlite_master WHERE name = ?", (name,)) == [(table,)]
    assert "started_at DESC" in objects[("index", "idx_sessions_started")]
    index_list = {r[1]: (r[2], r[4]) for r in query(head_db, "PRAGMA index_list(sessions)")}
    assert index_list["idx_sessions_title_unique"] == (1, 1)  # unique, partial
    assert index_list["idx_sessions_source"] == (0, 0)


def test_sessions_has_upstreams_41_columns_types_and_defaults(head_db: Path) -> None:
    assert table_info(head_db, "sessions") == SESSIONS_COLUMNS
    assert len(SESSIONS_COLUMNS) == 41


def test_messages_has_upstreams_19_columns_types_and_defaults(head_db: Path) -> None:
    assert table_info(head_db, "messages") == MESSAGES_COLUMNS
    assert len(MESSAGES_COLUMNS) == 19
    assert "AUTOINCREMENT" in master(head_db)[("table", "messages")]


def test_state_meta_and_schema_version_tables_match_upstream(head_db: Path) -> None:
    assert table_info(head_db, "state_meta") == STATE_META_COLUMNS
    assert table_info(head_db, "schema_version") == SCHEMA_VERSION_COLUMNS


def test_compression_lock_table_matches_upstream_and_no_topic_table_exists(head_db: Path) -> None:
    assert table_info(head_db, "compression_locks") == COMPRESSION_LOCKS_COLUMNS
    assert query(head_db, "SELECT name FROM sqlite_master WHERE name LIKE 'telegram_dm%'") == []
    assert query(head_db, "SELECT key, value FROM state_meta") == []


def test_topic_tables_created_on_first_use_match_upstream(head_db: Path) -> None:
    with SessionDB(head_db) as db:
        db.apply_telegram_topic_migration()
    assert table_info(head_db, "telegram_dm_topic_mode") == TOPIC_MODE_COLUMNS
    assert table_info(head_db, "telegram_dm_topic_bindings") == TOPIC_BINDINGS_COLUMNS
    objects = master(head_db)
    for name, (table, sql) in TOPIC_INDEX_SQL.items():
        assert normalise_sql(objects[("index", name)]) == normalise_sql(sql), name
        assert query(head_db, "SELECT tbl_name FROM sqlite_master WHERE name = ?", (name,)) == [(table,)]
    fks = query(head_db, "PRAGMA foreign_key_list(telegram_dm_topic_bindings)")
    # A deleted session takes its Telegram topic binding with it (upstream's second shape).
    assert [(r[2], r[3], r[4], r[5], r[6]) for r in fks] == [
        ("sessions", "session_id", "id", "NO ACTION", "CASCADE")
    ]
    # Upstream reads this key before it uses the topic tables: 2 is the shape with CASCADE.
    assert query(head_db, "SELECT key, value FROM state_meta") == [("telegram_dm_topic_schema_version", "2")]


def test_foreign_keys_reference_sessions_without_on_delete_action(head_db: Path) -> None:
    # (table, from, to, on_update, on_delete)
    def fks(table: str) -> list[tuple[object, ...]]:
        return [(r[2], r[3], r[4], r[5], r[6]) for r in query(head_db, f"PRAGMA foreign_key_list({table})")]

    assert fks("sessions") == [("sessions", "parent_session_id", "id", "NO ACTION", "NO ACTION")]
    assert fks("messages") == [("sessions", "session_id", "id", "NO ACTION", "NO ACTION")]
    assert fks("compression_locks") == []


def test_head_records_schema_version_17_once_and_the_head_revision(head_db: Path) -> None:
    assert schema_versions(head_db) == [HEAD_VERSION] == [17]
    assert alembic_versions(head_db) == [HEAD]


# --- FTS behaviour at head ---------------------------------------------------------------


def test_fts_stays_consistent_through_inserts_updates_and_deletes(head_db: Path) -> None:
    written = populate(head_db)
    ids = [m["id"] for m in written.messages]
    with closing(sqlite3.connect(str(head_db), isolation_level=None)) as conn:
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("UPDATE messages SET content = 'replaced with zeppelin text' WHERE id = ?", (ids[0],))
        conn.execute("UPDATE messages SET tool_name = 'file_editor' WHERE id = ?", (ids[5],))
        conn.execute("UPDATE messages SET token_count = 99 WHERE id = ?", (ids[2],))
        conn.execute("DELETE FROM messages WHERE id = ?", (ids[4],))
    for table in FTS_TABLES:
        fts_integrity_check(head_db, table)
        assert fts_rowids(head_db, table, "zeppelin") == [ids[0]]
        assert fts_rowids(head_db, table, "kubernetes") == []  # old content of ids[0] is gone
        assert fts_rowids(head_db, table, "file_editor") == [ids[5]]
        assert fts_rowids(head_db, table, "terminal") == []
        assert fts_rowids(head_db, table, "kubectl") == [ids[1], ids[2]]  # untouched by token_count
    assert fts_rowids(head_db, "messages_fts_trigram", "问题已经") == []  # deleted row
    count = query(head_db, "SELECT COUNT(*) FROM messages_fts")[0][0]
    assert count == len(ids) - 1


def test_tool_name_and_tool_call_arguments_are_found_by_both_fts_tables(head_db: Path) -> None:
    written = populate(head_db)
    assistant, tool = written.messages[1]["id"], written.messages[2]["id"]
    telegram_tool = written.messages[5]["id"]
    for table in FTS_TABLES:
        assert fts_rowids(head_db, table, '"web_search"') == [assistant, tool]
        assert fts_rowids(head_db, table, "terminal") == [telegram_tool]
    # tool_call_id is not indexed, the tool-call JSON (which repeats the id) is.
    assert fts_rowids(head_db, "messages_fts", '"call_0001"') == [assistant]
    assert fts_rowids(head_db, "messages_fts_trigram", "eb_sea") == [assistant, tool]


# --- stepping down and up one revision at a time -----------------------------------------

# What exists at revision N and not at N-1, as "kind:name" (columns as "column:table.name").
ADDED_BY_REVISION: dict[str, set[str]] = {
    "0002": {"column:messages.finish_reason"},
    "0003": {"column:sessions.title"},
    "0004": {"index:idx_sessions_title_unique"},
    "0005": {
        f"column:sessions.{c}"
        for c in (
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
            "billing_provider",
            "billing_base_url",
            "billing_mode",
            "estimated_cost_usd",
            "actual_cost_usd",
            "cost_status",
            "cost_source",
            "pricing_version",
        )
    },
    "0006": {
        "column:messages.reasoning",
        "column:messages.reasoning_details",
        "column:messages.codex_reasoning_items",
    },
    "0007": {"column:messages.reasoning_content"},
    "0008": {"column:sessions.api_call_count"},
    "0009": {"column:messages.codex_message_items"},
    "0010": {
        "table:messages_fts_trigram",
        *(f"table:messages_fts_trigram_{s}" for s in ("data", "idx", "docsize", "config")),
        "trigger:messages_fts_trigram_insert",
        "trigger:messages_fts_trigram_delete",
        "trigger:messages_fts_trigram_update",
    },
    # 0011 renames nothing: it makes both indexes inline, which gives each a _content table.
    "0011": {"table:messages_fts_content", "table:messages_fts_trigram_content"},
    # 0012-0018 change PostgreSQL only.
    "0019": {
        *(f"column:sessions.{c}" for c in list(SESSIONS_COLUMNS)[27:]),
        *(f"column:messages.{c}" for c in list(MESSAGES_COLUMNS)[15:]),
        *(f"table:{t}" for t in NEW_TABLES),
        *(f"index:sqlite_autoindex_{t}_1" for t in NEW_TABLES),
        *(f"index:{name}" for name in list(EXPECTED_INDEX_SQL)[5:]),
    },
}


def inventory(path: Path) -> set[str]:
    """Every named object and every column of sessions/messages, as "kind:name"."""
    items = {f"{kind}:{name}" for kind, name in master(path)}
    for table in ("sessions", "messages"):
        items |= {f"column:{table}.{c}" for c in table_info(path, table)}
    return items


def assert_rows_kept(path: Path, before: dict[str, dict]) -> None:
    """Every session and message row is still there, unchanged in the columns that remain."""
    for table in ("sessions", "messages"):
        after = read_rows(path, table)
        before_columns = set(next(iter(before[table].values())))
        assert restrict(after, before_columns) == restrict(before[table], table_info(path, table)), table


@pytest.fixture
def populated_head(db_path: Path) -> tuple[Path, dict[str, dict]]:
    migrate.upgrade(db_path)
    populate(db_path)
    return db_path, {t: read_rows(db_path, t) for t in ("sessions", "messages")}


@pytest.mark.parametrize("revision", sorted(ADDED_BY_REVISION, reverse=True))
def test_downgrade_removes_exactly_what_its_revision_added_and_keeps_rows(
    populated_head: tuple[Path, dict[str, dict]], revision: str
) -> None:
    path, before = populated_head
    migrate.downgrade(path, revision)
    at_revision = inventory(path)
    below = history().revisions[history().revisions.index(revision) - 1]
    migrate.downgrade(path, below)
    assert at_revision - inventory(path) == ADDED_BY_REVISION[revision]
    assert inventory(path) - at_revision == set()
    assert schema_versions(path) == [history().schema_version_of(below)]
    assert alembic_versions(path) == [below]
    assert_rows_kept(path, before)
    first_message = min(before["messages"])
    for table in FTS_TABLES:
        if f"table:{table}" in inventory(path):
            fts_integrity_check(path, table)
            assert fts_rowids(path, table, "kubernetes") == [first_message]


def test_stepping_down_to_0001_and_back_up_keeps_every_row_and_schema_version_in_step(
    populated_head: tuple[Path, dict[str, dict]],
) -> None:
    path, before = populated_head
    migrate.downgrade(path, "0018")
    assert (alembic_versions(path), schema_versions(path)) == (["0018"], [11])
    # 0012-0018 change PostgreSQL only: on SQLite stepping over them changes nothing.
    schema_at_0018 = inventory(path)
    migrate.downgrade(path, "-7")
    assert (alembic_versions(path), schema_versions(path)) == (["0011"], [11])
    assert inventory(path) == schema_at_0018
    for number in range(10, 0, -1):
        migrate.downgrade(path, "-1")
        assert alembic_versions(path) == [f"{number:04d}"]
        assert schema_versions(path) == [number]
        assert_rows_kept(path, before)
    assert inventory(path) >= {"table:messages_fts", "column:messages.token_count"}
    assert "column:messages.finish_reason" not in inventory(path)
    at_0001 = {t: read_rows(path, t) for t in ("sessions", "messages")}
    for number in range(2, 14):
        migrate.upgrade(path, "+1")
        assert alembic_versions(path) == [f"{number:04d}"]
        assert schema_versions(path) == [min(number, 11)]  # 0012 leaves upstream's v11
        assert_rows_kept(path, at_0001)
        assert_readded_columns_are_empty(path, at_0001)
    migrate.upgrade(path)
    assert (alembic_versions(path), schema_versions(path)) == ([HEAD], [HEAD_VERSION])
    assert_rows_kept(path, at_0001)
    assert_readded_columns_are_empty(path, at_0001)
    assert table_info(path, "sessions") == SESSIONS_COLUMNS
    assert table_info(path, "messages") == MESSAGES_COLUMNS
    for table in FTS_TABLES:
        fts_integrity_check(path, table)
        assert fts_rowids(path, table, "terminal") == [before_id(before, "terminal")]


def assert_readded_columns_are_empty(path: Path, floor: dict[str, dict]) -> None:
    """Columns dropped on the way down come back empty: NULL, or their default of 0 or 1."""
    expected_columns = {"sessions": SESSIONS_COLUMNS, "messages": MESSAGES_COLUMNS}
    for table in ("sessions", "messages"):
        kept = set(next(iter(floor[table].values())))
        for row in read_rows(path, table).values():
            for column, value in row.items():
                if column in kept:
                    continue
                default = expected_columns[table][column][2]
                empty = ("integer", int(default)) if default in ("0", "1") else ("null", None)
                assert value == empty, (table, column)


def before_id(before: dict[str, dict], tool_name: str) -> int:
    return next(k for k, row in before["messages"].items() if row["tool_name"][1] == tool_name)


def test_cli_downgrade_to_0001_and_upgrade_keeps_rows(
    populated_head: tuple[Path, dict[str, dict]], alembic_cli: Callable[..., object]
) -> None:
    path, before = populated_head
    alembic_cli(path, "downgrade", "0001")
    assert schema_versions(path) == [1]
    assert alembic_versions(path) == ["0001"]
    assert_rows_kept(path, before)
    at_0001 = {t: read_rows(path, t) for t in ("sessions", "messages")}
    alembic_cli(path, "upgrade", "head")
    assert schema_versions(path) == [HEAD_VERSION]
    assert alembic_versions(path) == [HEAD]
    assert_rows_kept(path, at_0001)
    assert_readded_columns_are_empty(path, at_0001)
    for table in FTS_TABLES:
        fts_integrity_check(path, table)


# --- offline SQL and drift ---------------------------------------------------------------


def test_offline_sql_keeps_schema_version_in_step(db_path: Path, alembic_cli: Callable[..., object]) -> None:
    result = alembic_cli(db_path, "upgrade", "0007:0011", "--sql")
    sql = result.stdout  # type: ignore[attr-defined]
    for number in range(8, 12):
        assert f"INSERT INTO schema_version (version) VALUES ({number});" in sql
        assert f"UPDATE alembic_version SET version_num='{number:04d}'" in sql
    assert sql.count("DELETE FROM schema_version;") == 4
    assert "VALUES (7);" not in sql
    assert not db_path.exists()  # offline mode never touches the database


def test_alembic_check_reports_no_drift_between_models_and_migrations(
    db_path: Path, alembic_cli: Callable[..., object]
) -> None:
    alembic_cli(db_path, "upgrade", "head")
    result = alembic_cli(db_path, "check")
    assert "No new upgrade operations detected" in result.stdout + result.stderr  # type: ignore[attr-defined]


# --- two paths to head -------------------------------------------------------------------


def normalised_catalogue(path: Path) -> dict[tuple[str, str], object]:
    """Names and types of every object; exact meaning of FTS tables, triggers and indexes;
    column definitions of ordinary tables (their SQL text records how columns were added)."""
    catalogue: dict[tuple[str, str], object] = {}
    for (kind, name), sql in master(path).items():
        if kind == "table" and not sql.upper().startswith("CREATE VIRTUAL TABLE"):
            catalogue[(kind, name)] = list(table_info(path, name).items())
        else:
            catalogue[(kind, name)] = normalise_sql(sql)
    return catalogue


def test_empty_and_legacy_v1_databases_reach_the_same_schema(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    legacy = tmp_path / "legacy.db"
    build_legacy_db(legacy, 1)
    populate(legacy)
    for path in (empty, legacy):
        engine = create_engine(path)
        try:
            migrate.ensure_schema(engine)
        finally:
            engine.dispose()
    assert normalised_catalogue(legacy) == normalised_catalogue(empty)
    assert len(read_rows(legacy, "messages")) == 6
