"""Telegram DM topic mode: the per-chat switch, topic bindings, pruning a dead topic, and
the user's sessions not yet bound to a topic."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from hermes_store import SessionDB


@pytest.fixture
def store(db: SessionDB, raw: Any) -> SessionDB:
    """The ``db`` store with its topic tables and no topic-mode rows (a SQLite store
    creates the tables on first use; the shared PostgreSQL store's emptier clears
    sessions, and so their bindings, but not the per-chat switch)."""
    db.apply_telegram_topic_migration()
    raw.execute("DELETE FROM telegram_dm_topic_bindings")
    raw.execute("DELETE FROM telegram_dm_topic_mode")
    return db


def mode_row(raw: Any, chat_id: str) -> dict[str, Any] | None:
    names = (
        "chat_id",
        "user_id",
        "enabled",
        "activated_at",
        "updated_at",
        "has_topics_enabled",
        "allows_users_to_create_topics",
        "capability_checked_at",
    )
    rows = raw.rows(f"SELECT {', '.join(names)} FROM telegram_dm_topic_mode WHERE chat_id = ?", (chat_id,))
    return dict(zip(names, rows[0], strict=True)) if rows else None


def bind(store: SessionDB, chat_id: Any, thread_id: Any, session_id: str, **kw: Any) -> None:
    values = {"user_id": "u1", "session_key": f"agent:main:telegram:dm:{chat_id}:{thread_id}"} | kw
    store.bind_telegram_topic(chat_id=chat_id, thread_id=thread_id, session_id=session_id, **values)


def is_integrity_error(error: BaseException) -> bool:
    """The driver's IntegrityError: sqlite3's, or the PostgreSQL driver's."""
    return any(cls.__name__ == "IntegrityError" for cls in type(error).__mro__)


# --- the schema version ------------------------------------------------------------------------


def test_the_migration_records_version_2_and_may_run_again(store: SessionDB, raw: Any) -> None:
    store.create_session("s1", "telegram")
    bind(store, "c1", "t1", "s1")
    # Take the mark away to see the call put it back.
    raw.execute("DELETE FROM state_meta WHERE key = ?", ("telegram_dm_topic_schema_version",))
    store.apply_telegram_topic_migration()
    assert store.get_meta("telegram_dm_topic_schema_version") == "2"
    store.apply_telegram_topic_migration()
    assert store.get_meta("telegram_dm_topic_schema_version") == "2"
    assert (store.get_telegram_topic_binding(chat_id="c1", thread_id="t1") or {})["session_id"] == "s1"


def test_enabling_and_binding_record_the_version_too(store: SessionDB, raw: Any) -> None:
    store.create_session("s1", "telegram")
    raw.execute("DELETE FROM state_meta WHERE key = ?", ("telegram_dm_topic_schema_version",))
    bind(store, 1, 2, "s1")
    assert store.get_meta("telegram_dm_topic_schema_version") == "2"
    raw.execute("DELETE FROM state_meta WHERE key = ?", ("telegram_dm_topic_schema_version",))
    store.enable_telegram_topic_mode(chat_id=1, user_id=3)
    assert store.get_meta("telegram_dm_topic_schema_version") == "2"


# --- tables created on first use (SQLite) --------------------------------------------------------


def topic_tables(raw: Any) -> list[str]:
    return [row[0] for row in raw.rows(TOPIC_TABLES_SQL)]


TOPIC_TABLES_SQL = (
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'telegram_dm%' ORDER BY name"
)


def untouched_store(db: SessionDB, raw: Any, backend: str) -> SessionDB:
    """``db`` as nobody opted in to topic mode: on SQLite without the tables; on the
    shared PostgreSQL store (which always has them) with them empty."""
    if backend == "sqlite":
        assert topic_tables(raw) == []
    else:
        raw.execute("DELETE FROM telegram_dm_topic_bindings")
        raw.execute("DELETE FROM telegram_dm_topic_mode")
    return db


def test_every_reader_answers_empty_and_creates_nothing(db: SessionDB, raw: Any, backend: str) -> None:
    store = untouched_store(db, raw, backend)
    store.create_session("s1", "telegram", user_id="u1")
    assert store.is_telegram_topic_mode_enabled(chat_id=1, user_id=2) is False
    assert store.get_telegram_topic_binding(chat_id=1, thread_id=2) is None
    assert store.get_telegram_topic_binding_by_session(session_id="s1") is None
    assert store.list_telegram_topic_bindings_for_chat(chat_id=1) == []
    assert store.is_telegram_session_linked_to_topic(session_id="s1") is False
    # No bindings table: every one of the user's Telegram sessions is unbound.
    unlinked = store.list_unlinked_telegram_sessions_for_user(chat_id=1, user_id="u1")
    assert [row["id"] for row in unlinked] == ["s1"]
    store.disable_telegram_topic_mode(chat_id=1)
    store.disable_telegram_topic_mode(chat_id=1, clear_bindings=False)
    assert store.delete_telegram_topic_binding(chat_id=1, thread_id=2) == 0
    if backend == "sqlite":
        assert topic_tables(raw) == []
        assert store.get_meta("telegram_dm_topic_schema_version") is None


def test_the_migration_creates_the_tables_once(db: SessionDB, raw: Any, backend: str) -> None:
    store = untouched_store(db, raw, backend)
    store.apply_telegram_topic_migration()
    store.apply_telegram_topic_migration()
    assert store.get_meta("telegram_dm_topic_schema_version") == "2"
    if backend == "sqlite":
        assert topic_tables(raw) == ["telegram_dm_topic_bindings", "telegram_dm_topic_mode"]
    assert store.list_telegram_topic_bindings_for_chat(chat_id=1) == []


FIRST_SHAPE_BINDINGS = """CREATE TABLE telegram_dm_topic_bindings (
    chat_id TEXT NOT NULL, thread_id TEXT NOT NULL, user_id TEXT NOT NULL,
    session_key TEXT NOT NULL, session_id TEXT NOT NULL REFERENCES sessions(id),
    managed_mode TEXT NOT NULL DEFAULT 'auto', linked_at REAL NOT NULL, updated_at REAL NOT NULL,
    PRIMARY KEY (chat_id, thread_id))"""


def test_the_migration_rebuilds_a_first_shape_bindings_table_with_its_cascade(
    db: SessionDB, raw: Any, backend: str
) -> None:
    """A bindings table of upstream's first layout (no ON DELETE CASCADE) is rebuilt, its
    rows kept, as upstream's own migration does."""
    raw.sqlite_only("the first-shape bindings table")
    store = untouched_store(db, raw, backend)
    store.apply_telegram_topic_migration()
    store.create_session("s1", "telegram")
    raw.execute("DROP TABLE telegram_dm_topic_bindings")
    raw.execute(FIRST_SHAPE_BINDINGS)
    raw.execute(
        "INSERT INTO telegram_dm_topic_bindings VALUES ('c1', 't1', 'u', 'k', 's1', 'auto', 1, 2)"
    )
    raw.execute("UPDATE state_meta SET value = '1' WHERE key = 'telegram_dm_topic_schema_version'")
    raw.conn.commit()
    store.apply_telegram_topic_migration()
    keys = raw.rows("PRAGMA foreign_key_list('telegram_dm_topic_bindings')")
    cascade = [row[6] for row in keys]
    assert cascade == ["CASCADE"]
    assert store.get_meta("telegram_dm_topic_schema_version") == "2"
    assert [b["thread_id"] for b in store.list_telegram_topic_bindings_for_chat(chat_id="c1")] == ["t1"]
    index = "SELECT count(*) FROM sqlite_master WHERE name = 'idx_telegram_dm_topic_bindings_session'"
    assert raw.one(index) == 1
    assert store.delete_session("s1")
    assert store.list_telegram_topic_bindings_for_chat(chat_id="c1") == []


def test_the_rebuild_leaves_out_a_binding_whose_session_is_gone_as_the_upgrade_does(
    db: SessionDB, raw: Any, backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A first-layout table may hold a binding to a deleted session (written with foreign
    keys off). The cascading key cannot hold it, and it routes a topic to nothing: it is
    left out with a warning, the other bindings kept, as revision 0019's rebuild does."""
    raw.sqlite_only("the first-shape bindings table")
    store = untouched_store(db, raw, backend)
    store.apply_telegram_topic_migration()
    store.create_session("s1", "telegram")
    raw.execute("DROP TABLE telegram_dm_topic_bindings")
    raw.execute(FIRST_SHAPE_BINDINGS)
    raw.execute("PRAGMA foreign_keys=OFF")
    raw.execute("INSERT INTO telegram_dm_topic_bindings VALUES ('c1', 't1', 'u', 'k', 's1', 'auto', 1, 2)")
    raw.execute("INSERT INTO telegram_dm_topic_bindings VALUES ('c1', 't2', 'u', 'k2', 'gone', 'auto', 1, 2)")
    raw.execute("UPDATE state_meta SET value = '1' WHERE key = 'telegram_dm_topic_schema_version'")
    raw.conn.commit()
    with caplog.at_level(logging.WARNING):
        store.apply_telegram_topic_migration()
    assert [b["thread_id"] for b in store.list_telegram_topic_bindings_for_chat(chat_id="c1")] == ["t1"]
    keys = raw.rows("PRAGMA foreign_key_list('telegram_dm_topic_bindings')")
    assert [row[6] for row in keys] == ["CASCADE"]
    assert any("binding(s) whose session no longer exists" in r.getMessage() for r in caplog.records)
    assert store.get_meta("telegram_dm_topic_schema_version") == "2"


def test_enabling_creates_the_tables(db: SessionDB, raw: Any, backend: str) -> None:
    store = untouched_store(db, raw, backend)
    store.enable_telegram_topic_mode(chat_id=1, user_id=2)
    assert store.is_telegram_topic_mode_enabled(chat_id=1, user_id=2) is True
    assert store.get_meta("telegram_dm_topic_schema_version") == "2"
    if backend == "sqlite":
        assert topic_tables(raw) == ["telegram_dm_topic_bindings", "telegram_dm_topic_mode"]


def test_binding_creates_the_tables_and_a_deleted_session_takes_its_binding(
    db: SessionDB, raw: Any, backend: str
) -> None:
    store = untouched_store(db, raw, backend)
    store.create_session("s1", "telegram")
    store.create_session("s2", "telegram")
    bind(store, "c1", "t1", "s1")
    bind(store, "c1", "t2", "s2")
    if backend == "sqlite":
        assert topic_tables(raw) == ["telegram_dm_topic_bindings", "telegram_dm_topic_mode"]
    assert store.is_telegram_session_linked_to_topic(session_id="s1") is True
    assert store.delete_session("s1")
    assert [b["thread_id"] for b in store.list_telegram_topic_bindings_for_chat(chat_id="c1")] == ["t2"]


# --- the per-chat switch -----------------------------------------------------------------------


def test_enable_stores_the_chat_and_its_capabilities(store: SessionDB, raw: Any) -> None:
    before = time.time()
    store.enable_telegram_topic_mode(
        chat_id=1001, user_id=42, has_topics_enabled=True, allows_users_to_create_topics=False
    )
    row = mode_row(raw, "1001") or {}
    assert (row["chat_id"], row["user_id"], row["enabled"]) == ("1001", "42", 1)
    assert (row["has_topics_enabled"], row["allows_users_to_create_topics"]) == (1, 0)
    assert before <= row["activated_at"] == row["updated_at"] == row["capability_checked_at"] <= time.time()
    assert store.is_telegram_topic_mode_enabled(chat_id=1001, user_id=42) is True
    assert store.is_telegram_topic_mode_enabled(chat_id="1001", user_id="42") is True


def test_unknown_capabilities_are_stored_as_null(store: SessionDB, raw: Any) -> None:
    store.enable_telegram_topic_mode(chat_id="c1", user_id="u1")
    row = mode_row(raw, "c1") or {}
    assert (row["has_topics_enabled"], row["allows_users_to_create_topics"]) == (None, None)


def test_enabling_again_keeps_the_first_activation_and_replaces_the_rest(store: SessionDB, raw: Any) -> None:
    store.enable_telegram_topic_mode(chat_id="c1", user_id="u1", has_topics_enabled=True)
    raw.execute(
        "UPDATE telegram_dm_topic_mode SET activated_at = 10.0, updated_at = 10.0, enabled = 0"
        " WHERE chat_id = ?",
        ("c1",),
    )
    store.enable_telegram_topic_mode(chat_id="c1", user_id="u2", allows_users_to_create_topics=True)
    row = mode_row(raw, "c1") or {}
    assert row["activated_at"] == 10.0
    assert row["updated_at"] > 10.0
    assert (row["user_id"], row["enabled"]) == ("u2", 1)
    assert (row["has_topics_enabled"], row["allows_users_to_create_topics"]) == (None, 1)


def test_topic_mode_is_on_only_for_the_chat_and_its_user(store: SessionDB) -> None:
    store.enable_telegram_topic_mode(chat_id="c1", user_id="u1")
    assert store.is_telegram_topic_mode_enabled(chat_id="c1", user_id="u2") is False
    assert store.is_telegram_topic_mode_enabled(chat_id="c2", user_id="u1") is False


def test_disable_switches_off_and_clears_the_chats_bindings(store: SessionDB, raw: Any) -> None:
    for session_id in ("s1", "s2", "s3"):
        store.create_session(session_id, "telegram")
    store.enable_telegram_topic_mode(chat_id="c1", user_id="u1")
    bind(store, "c1", "t1", "s1")
    bind(store, "c1", "t2", "s2")
    bind(store, "c2", "t1", "s3")
    store.disable_telegram_topic_mode(chat_id="c1")
    assert store.is_telegram_topic_mode_enabled(chat_id="c1", user_id="u1") is False
    assert (mode_row(raw, "c1") or {})["enabled"] == 0
    assert store.list_telegram_topic_bindings_for_chat(chat_id="c1") == []
    assert [b["session_id"] for b in store.list_telegram_topic_bindings_for_chat(chat_id="c2")] == ["s3"]


def test_disable_may_keep_the_bindings(store: SessionDB) -> None:
    store.create_session("s1", "telegram")
    store.enable_telegram_topic_mode(chat_id="c1", user_id="u1")
    bind(store, "c1", "t1", "s1")
    store.disable_telegram_topic_mode(chat_id="c1", clear_bindings=False)
    assert store.is_telegram_topic_mode_enabled(chat_id="c1", user_id="u1") is False
    assert store.is_telegram_session_linked_to_topic(session_id="s1") is True
    store.enable_telegram_topic_mode(chat_id="c1", user_id="u1")
    assert (store.get_telegram_topic_binding(chat_id="c1", thread_id="t1") or {})["session_id"] == "s1"


def test_disabling_a_chat_never_enabled_does_nothing(store: SessionDB, raw: Any) -> None:
    store.disable_telegram_topic_mode(chat_id="c1")
    store.disable_telegram_topic_mode(chat_id="c1")
    assert mode_row(raw, "c1") is None
    assert store.is_telegram_topic_mode_enabled(chat_id="c1", user_id="u1") is False


# --- bindings ----------------------------------------------------------------------------------


def test_a_binding_reads_back_by_topic_and_by_session(store: SessionDB) -> None:
    store.create_session("s1", "telegram")
    before = time.time()
    store.bind_telegram_topic(
        chat_id=1001, thread_id=77, user_id=42, session_key="agent:main:telegram:dm:1001:77", session_id="s1"
    )
    binding = store.get_telegram_topic_binding(chat_id=1001, thread_id=77)
    assert binding is not None
    assert {k: v for k, v in binding.items() if k not in ("linked_at", "updated_at")} == {
        "chat_id": "1001",
        "thread_id": "77",
        "user_id": "42",
        "session_key": "agent:main:telegram:dm:1001:77",
        "session_id": "s1",
        "managed_mode": "auto",
    }
    assert before <= binding["linked_at"] == binding["updated_at"] <= time.time()
    assert store.get_telegram_topic_binding_by_session(session_id="s1") == binding
    assert store.is_telegram_session_linked_to_topic(session_id="s1") is True


def test_missing_bindings_read_as_none_and_false(store: SessionDB) -> None:
    store.create_session("s1", "telegram")
    assert store.get_telegram_topic_binding(chat_id="c1", thread_id="t1") is None
    assert store.get_telegram_topic_binding_by_session(session_id="s1") is None
    assert store.is_telegram_session_linked_to_topic(session_id="s1") is False
    assert store.list_telegram_topic_bindings_for_chat(chat_id="c1") == []


def test_binding_the_same_topic_again_updates_it(store: SessionDB, raw: Any) -> None:
    store.create_session("s1", "telegram")
    bind(store, "c1", "t1", "s1")
    raw.execute("UPDATE telegram_dm_topic_bindings SET linked_at = 5.0, updated_at = 5.0")
    bind(store, "c1", "t1", "s1", managed_mode="manual", session_key="k2")
    binding = store.get_telegram_topic_binding(chat_id="c1", thread_id="t1") or {}
    assert (binding["linked_at"], binding["managed_mode"], binding["session_key"]) == (5.0, "manual", "k2")
    assert binding["updated_at"] > 5.0


def test_a_topic_can_move_to_another_session(store: SessionDB) -> None:
    store.create_session("s1", "telegram")
    store.create_session("s2", "telegram")
    bind(store, "c1", "t1", "s1")
    bind(store, "c1", "t1", "s2")
    assert (store.get_telegram_topic_binding(chat_id="c1", thread_id="t1") or {})["session_id"] == "s2"
    assert store.is_telegram_session_linked_to_topic(session_id="s1") is False


def test_a_session_binds_to_one_topic_only(store: SessionDB) -> None:
    store.create_session("s1", "telegram")
    bind(store, "c1", "t1", "s1")
    with pytest.raises(ValueError, match=r"^session is already linked to another Telegram topic$"):
        bind(store, "c1", "t2", "s1")
    with pytest.raises(ValueError, match="already linked"):
        bind(store, "c2", "t1", "s1")
    assert store.get_telegram_topic_binding(chat_id="c1", thread_id="t2") is None
    assert (store.get_telegram_topic_binding_by_session(session_id="s1") or {})["thread_id"] == "t1"


def test_binding_an_unknown_session_fails_the_foreign_key(store: SessionDB) -> None:
    # The driver's own IntegrityError class: sqlite3's or the PostgreSQL driver's.
    with pytest.raises(Exception) as raised:
        bind(store, "c1", "t1", "nowhere")
    assert is_integrity_error(raised.value)
    assert store.get_telegram_topic_binding(chat_id="c1", thread_id="t1") is None


def test_bindings_of_a_chat_newest_first(store: SessionDB, raw: Any) -> None:
    for n, session_id in enumerate(("s1", "s2", "s3")):
        store.create_session(session_id, "telegram")
        bind(store, "c1", f"t{n}", session_id)
    store.create_session("other", "telegram")
    bind(store, "c2", "t9", "other")
    for thread_id, updated in (("t0", 300.0), ("t1", 100.0), ("t2", 200.0)):
        raw.execute(
            "UPDATE telegram_dm_topic_bindings SET updated_at = ? WHERE thread_id = ?", (updated, thread_id)
        )
    bindings = store.list_telegram_topic_bindings_for_chat(chat_id="c1")
    assert [b["thread_id"] for b in bindings] == ["t0", "t2", "t1"]


def test_deleting_a_session_deletes_its_binding(store: SessionDB, raw: Any) -> None:
    store.create_session("s1", "telegram")
    store.create_session("s2", "telegram")
    bind(store, "c1", "t1", "s1")
    bind(store, "c1", "t2", "s2")
    assert store.delete_session("s1") is True
    assert store.get_telegram_topic_binding(chat_id="c1", thread_id="t1") is None
    assert store.is_telegram_session_linked_to_topic(session_id="s1") is False
    assert [row[0] for row in raw.rows("SELECT thread_id FROM telegram_dm_topic_bindings")] == ["t2"]


# --- pruning a dead topic ------------------------------------------------------------------


def test_delete_binding_removes_one_topic(store: SessionDB) -> None:
    store.create_session("s1", "telegram")
    store.create_session("s2", "telegram")
    bind(store, 1001, 7, "s1")
    bind(store, 1001, 8, "s2")
    assert store.delete_telegram_topic_binding(chat_id=1001, thread_id=7) == 1
    assert store.get_telegram_topic_binding(chat_id="1001", thread_id="7") is None
    assert store.get_telegram_topic_binding(chat_id="1001", thread_id="8") is not None
    assert store.delete_telegram_topic_binding(chat_id=1001, thread_id=7) == 0


def test_delete_binding_of_a_missing_topic_is_zero(store: SessionDB) -> None:
    assert store.delete_telegram_topic_binding(chat_id="c1", thread_id="t1") == 0


def test_pruning_the_last_binding_switches_the_chat_off(store: SessionDB, raw: Any) -> None:
    store.create_session("s1", "telegram")
    store.enable_telegram_topic_mode(chat_id="c1", user_id="u1")
    bind(store, "c1", "t1", "s1")
    raw.execute("UPDATE telegram_dm_topic_mode SET updated_at = 1.0")
    assert store.delete_telegram_topic_binding(chat_id="c1", thread_id="t1") == 1
    assert store.is_telegram_topic_mode_enabled(chat_id="c1", user_id="u1") is False
    assert (mode_row(raw, "c1") or {})["updated_at"] > 1.0


def test_pruning_keeps_the_chat_on_while_bindings_remain(store: SessionDB) -> None:
    store.create_session("s1", "telegram")
    store.create_session("s2", "telegram")
    store.enable_telegram_topic_mode(chat_id="c1", user_id="u1")
    bind(store, "c1", "t1", "s1")
    bind(store, "c1", "t2", "s2")
    assert store.delete_telegram_topic_binding(chat_id="c1", thread_id="t1") == 1
    assert store.is_telegram_topic_mode_enabled(chat_id="c1", user_id="u1") is True


def test_pruning_nothing_leaves_the_chat_on(store: SessionDB) -> None:
    store.enable_telegram_topic_mode(chat_id="c1", user_id="u1")
    assert store.delete_telegram_topic_binding(chat_id="c1", thread_id="gone") == 0
    assert store.is_telegram_topic_mode_enabled(chat_id="c1", user_id="u1") is True


# --- sessions not yet bound ------------------------------------------------------------------


def test_unlinked_sessions_of_the_user_most_recently_active_first(
    store: SessionDB, make_session: Any, raw: Any
) -> None:
    make_session("quiet", started=100.0, source="telegram", user_id="u1")
    make_session("busy", started=50.0, source="telegram", user_id="u1")
    message_id = store.append_message("busy", "user", "a\nlong first line " + "x" * 80)
    raw.set_message_time(message_id, 500.0)
    make_session("bound", started=300.0, source="telegram", user_id="u1")
    bind(store, "c1", "t1", "bound")
    make_session("other-user", started=400.0, source="telegram", user_id="u2")
    make_session("cli", started=400.0, source="cli", user_id="u1")
    rows = store.list_unlinked_telegram_sessions_for_user(chat_id="ignored", user_id="u1")
    assert [row["id"] for row in rows] == ["busy", "quiet"]
    busy, quiet = rows
    assert busy["last_active"] == 500.0
    assert busy["preview"] == ("a long first line " + "x" * 80)[:60] + "..."
    assert (quiet["last_active"], quiet["preview"]) == (100.0, "")
    assert {k: v for k, v in quiet.items() if k not in ("last_active", "preview")} == store.get_session(
        "quiet"
    )


def test_unlinked_sessions_match_the_rich_listing(store: SessionDB, make_session: Any) -> None:
    make_session("s1", started=100.0, source="telegram", user_id="u1")
    store.append_message("s1", "user", [{"type": "text", "text": "multimodal hello"}, {"type": "image_url"}])
    (row,) = store.list_unlinked_telegram_sessions_for_user(chat_id="c1", user_id="u1")
    (rich,) = store.list_sessions_rich(source="telegram")
    assert (row["preview"], row["last_active"]) == (rich["preview"], rich["last_active"])


def test_unlinked_sessions_include_archived_and_child_sessions(
    store: SessionDB, make_session: Any, raw: Any
) -> None:
    make_session("parent", started=100.0, source="telegram", user_id="u1")
    make_session("child", started=200.0, source="telegram", user_id="u1", parent="parent")
    raw.execute("UPDATE sessions SET archived = 1 WHERE id = ?", ("parent",))
    rows = store.list_unlinked_telegram_sessions_for_user(chat_id="c1", user_id="u1")
    assert [row["id"] for row in rows] == ["child", "parent"]


def test_unlinked_sessions_limit_and_id_coercion(store: SessionDB, make_session: Any) -> None:
    for n in range(5):
        make_session(f"s{n}", started=100.0 + n, source="telegram", user_id="42")
    rows = store.list_unlinked_telegram_sessions_for_user(chat_id=1001, user_id=42, limit=2)
    assert [row["id"] for row in rows] == ["s4", "s3"]
    assert store.list_unlinked_telegram_sessions_for_user(chat_id=1001, user_id=42, limit=0) == []
    with pytest.raises(ValueError, match="limit"):
        store.list_unlinked_telegram_sessions_for_user(chat_id=1001, user_id=42, limit=-1)


# --- concurrent binding --------------------------------------------------------------------------


def test_a_session_bound_by_a_concurrent_writer_is_refused(store: SessionDB, api: str) -> None:
    """Another writer binds the session to another topic between this call's check and its
    insert: the call still refuses with the ``ValueError`` (on PostgreSQL through the
    session's unique index, as the check ran before the other writer committed)."""
    if api == "async":
        pytest.skip("holds a transaction open on the sync engine")
    from sqlalchemy import insert

    from hermes_store.schema.models import TelegramTopicBinding

    store.create_session("s1", "telegram")
    outcome: list[BaseException | None] = []
    other_writer = store.engine.connect()
    transaction = other_writer.begin()
    try:
        other_writer.execute(
            insert(TelegramTopicBinding).values(
                chat_id="c1",
                thread_id="t1",
                user_id="u1",
                session_key="k",
                session_id="s1",
                linked_at=1.0,
                updated_at=1.0,
            )
        )

        def bind_elsewhere() -> None:
            try:
                bind(store, "c1", "t2", "s1")
                outcome.append(None)
            except BaseException as exc:  # the thread reports whatever it met
                outcome.append(exc)

        binder = threading.Thread(target=bind_elsewhere)
        binder.start()
        time.sleep(0.3)  # the binder is now waiting for the other writer
        transaction.commit()
        binder.join(30)
    finally:
        other_writer.close()
    assert len(outcome) == 1 and isinstance(outcome[0], ValueError)
    assert str(outcome[0]) == "session is already linked to another Telegram topic"
    assert [b["thread_id"] for b in store.list_telegram_topic_bindings_for_chat(chat_id="c1")] == ["t1"]


def test_threads_binding_one_session_to_different_topics(store: SessionDB) -> None:
    store.create_session("s1", "telegram")
    binders = 6
    start = threading.Barrier(binders)
    refused: list[int] = []
    guard = threading.Lock()

    def bind_topic(n: int) -> None:
        start.wait()
        try:
            bind(store, "c1", f"t{n}", "s1")
        except ValueError:
            with guard:
                refused.append(n)

    threads = [threading.Thread(target=bind_topic, args=(n,)) for n in range(binders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    (bound,) = store.list_telegram_topic_bindings_for_chat(chat_id="c1")
    assert len(refused) == binders - 1
    assert bound["thread_id"] not in {f"t{n}" for n in refused}
