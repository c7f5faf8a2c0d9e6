"""Session lifecycle: create/ensure, end/reopen, system prompt, lookup, id resolution, close."""

from __future__ import annotations

import sqlite3
import threading
import time

import psycopg
import pytest

from hermes_store import SessionDB

# The driver's own IntegrityError: sqlite3's (as upstream) or psycopg's.
DRIVER_INTEGRITY_ERRORS = (sqlite3.IntegrityError, psycopg.IntegrityError)

SESSION_KEYS = {
    "id",
    "source",
    "user_id",
    "model",
    "model_config",
    "system_prompt",
    "parent_session_id",
    "started_at",
    "ended_at",
    "end_reason",
    "message_count",
    "tool_call_count",
    "input_tokens",
    "output_tokens",
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
    "title",
    "api_call_count",
    # Added by upstream's schemas 12 to 17.
    "session_key",
    "chat_id",
    "chat_type",
    "thread_id",
    "cwd",
    "git_branch",
    "git_repo_root",
    "handoff_state",
    "handoff_platform",
    "handoff_error",
    "compression_failure_cooldown_until",
    "compression_failure_error",
    "rewind_count",
    "archived",
}


# --- create_session ------------------------------------------------------------------------


def test_create_session_returns_the_id(db):
    assert db.create_session("sess-001", "cli") == "sess-001"


def test_create_session_with_every_keyword(db):
    db.create_session("parent-9", "cli")
    db.create_session(
        "child-9",
        "telegram",
        model="openai/gpt-5-mini",
        model_config={"temperature": 0.2, "max_tokens": 512},
        system_prompt="Answer like a pirate.",
        user_id="u-77",
        parent_session_id="parent-9",
        session_key="agent:main:telegram:dm:42",
        chat_id="42",
        chat_type="dm",
        thread_id="7",
        cwd="/home/u/project",
    )
    row = db.get_session("child-9")
    assert row["source"] == "telegram"
    assert row["model"] == "openai/gpt-5-mini"
    assert row["model_config"] == '{"temperature": 0.2, "max_tokens": 512}'
    assert row["system_prompt"] == "Answer like a pirate."
    assert row["user_id"] == "u-77"
    assert row["parent_session_id"] == "parent-9"
    assert (row["session_key"], row["chat_id"], row["chat_type"], row["thread_id"], row["cwd"]) == (
        "agent:main:telegram:dm:42",
        "42",
        "dm",
        "7",
        "/home/u/project",
    )


def test_create_session_defaults(db):
    before = time.time()
    db.create_session("plain", "cron")
    after = time.time()
    row = db.get_session("plain")
    assert before <= row["started_at"] <= after
    assert isinstance(row["started_at"], float)
    expected_defaults = {
        "user_id": None,
        "model": None,
        "model_config": None,
        "system_prompt": None,
        "parent_session_id": None,
        "ended_at": None,
        "end_reason": None,
        "message_count": 0,
        "tool_call_count": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "reasoning_tokens": 0,
        "billing_provider": None,
        "billing_base_url": None,
        "billing_mode": None,
        "estimated_cost_usd": None,
        "actual_cost_usd": None,
        "cost_status": None,
        "cost_source": None,
        "pricing_version": None,
        "title": None,
        "api_call_count": 0,
        "session_key": None,
        "chat_id": None,
        "chat_type": None,
        "thread_id": None,
        "cwd": None,
        "git_branch": None,
        "git_repo_root": None,
        "handoff_state": None,
        "rewind_count": 0,
        "archived": 0,
    }
    assert {key: row[key] for key in expected_defaults} == expected_defaults


def test_started_at_is_stored_as_real(db, raw):
    db.create_session("r1", "cli")
    assert raw.typeof("sessions", "started_at", "r1") == "real"


def test_empty_model_config_is_stored_as_null(db):
    db.create_session("cfg-empty", "cli", model_config={})
    assert db.get_session("cfg-empty")["model_config"] is None


def test_model_config_keeps_non_ascii_readable(db):
    db.create_session("cfg-cjk", "cli", model_config={"persona": "助手"})
    assert db.get_session("cfg-cjk")["model_config"] == '{"persona": "助手"}'


def test_create_session_rejects_unknown_keyword(db):
    with pytest.raises(TypeError):
        db.create_session("bad-kw", "cli", colour="blue")
    assert db.get_session("bad-kw") is None


def test_create_session_takes_no_third_positional_argument(db):
    with pytest.raises(TypeError):
        db.create_session("pos", "cli", "some-model")


def test_create_session_duplicate_id_keeps_every_stored_value(db):
    db.create_session("dup", "cli", model="first-model", system_prompt="one")
    assert db.create_session("dup", "discord", model="second-model", system_prompt="two") == "dup"
    row = db.get_session("dup")
    assert (row["source"], row["model"], row["system_prompt"]) == ("cli", "first-model", "one")
    assert db.session_count() == 1


ENRICHABLE = {
    "model": "m-late",
    "system_prompt": "late prompt",
    "session_key": "agent:main:slack:thread",
    "chat_id": "C1",
    "chat_type": "channel",
    "thread_id": "T1",
    "cwd": "/late/cwd",
}


def test_create_session_on_a_bare_row_fills_in_what_is_missing(db, raw):
    # The gateway writes a bare row first; the agent's own create_session completes it.
    db.create_session("parent", "cli")
    db.create_session("bare", "telegram", user_id="u-1")
    raw.set_started("bare", 123.0)
    db.create_session(
        "bare",
        "cli",
        user_id="u-2",
        model_config={"temperature": 1},
        parent_session_id="parent",
        **ENRICHABLE,
    )
    row = db.get_session("bare")
    assert {key: row[key] for key in ENRICHABLE} == ENRICHABLE
    assert row["model_config"] == '{"temperature": 1}'
    assert row["parent_session_id"] == "parent"
    # Never changed by a later call:
    assert (row["source"], row["user_id"], row["started_at"]) == ("telegram", "u-1", 123.0)


def test_create_session_never_overwrites_a_stored_value(db):
    db.create_session("p1", "cli")
    db.create_session("p2", "cli")
    db.create_session("full", "cli", model_config={"a": 1}, parent_session_id="p1", **ENRICHABLE)
    db.create_session(
        "full",
        "cli",
        model_config={"b": 2},
        parent_session_id="p2",
        **{key: f"other {value}" for key, value in ENRICHABLE.items()},
    )
    row = db.get_session("full")
    assert {key: row[key] for key in ENRICHABLE} == ENRICHABLE
    assert (row["model_config"], row["parent_session_id"]) == ('{"a": 1}', "p1")


def test_create_session_fills_some_columns_and_keeps_others(db):
    db.create_session("half", "cli", model="kept", chat_id="kept-chat")
    db.create_session("half", "cli", model="ignored", chat_id="ignored", cwd="/new", thread_id="t")
    row = db.get_session("half")
    assert (row["model"], row["chat_id"], row["cwd"], row["thread_id"]) == ("kept", "kept-chat", "/new", "t")


def test_create_session_conflict_naming_a_missing_parent_raises_integrity_error(db):
    db.create_session("existing", "cli")
    with pytest.raises(DRIVER_INTEGRITY_ERRORS):
        db.create_session("existing", "cli", parent_session_id="no-such-parent", model="m")
    row = db.get_session("existing")
    assert (row["parent_session_id"], row["model"]) == (None, None)


def test_create_session_conflict_keeps_a_parent_already_stored(db):
    # The stored parent wins, so a missing one named later is never checked.
    db.create_session("p", "cli")
    db.create_session("child", "cli", parent_session_id="p")
    db.create_session("child", "cli", parent_session_id="no-such-parent")
    assert db.get_session("child")["parent_session_id"] == "p"


def test_create_session_rejects_mistyped_new_keywords(db):
    for name in ("session_key", "chat_id", "chat_type", "thread_id", "cwd"):
        with pytest.raises(TypeError):
            db.create_session("typed", "cli", **{name: 42})
    assert db.get_session("typed") is None


def test_create_session_with_missing_parent_raises_integrity_error(db):
    with pytest.raises(sqlite3.IntegrityError):
        db.create_session("orphan", "cli", parent_session_id="no-such-parent")
    assert db.get_session("orphan") is None
    assert db.session_count() == 0


# --- ensure_session ------------------------------------------------------------------------


def test_ensure_session_defaults_source_to_unknown(db):
    assert db.ensure_session("ens-1") == "ens-1"
    row = db.get_session("ens-1")
    assert row["source"] == "unknown"
    assert row["model"] is None


def test_ensure_session_accepts_positional_source_and_model(db):
    db.ensure_session("ens-2", "slack", "anthropic/claude-haiku")
    row = db.get_session("ens-2")
    assert (row["source"], row["model"]) == ("slack", "anthropic/claude-haiku")


def test_ensure_session_accepts_the_create_keywords(db):
    db.create_session("ens-parent", "cli")
    db.ensure_session(
        "ens-3",
        source="cli",
        model="m-3",
        model_config={"top_p": 0.5},
        system_prompt="sp",
        user_id="u-3",
        parent_session_id="ens-parent",
    )
    row = db.get_session("ens-3")
    assert row["model_config"] == '{"top_p": 0.5}'
    assert (row["system_prompt"], row["user_id"], row["parent_session_id"]) == ("sp", "u-3", "ens-parent")


def test_ensure_session_never_overwrites(db):
    db.create_session("ens-4", "cli", model="kept", system_prompt="kept prompt")
    assert db.ensure_session("ens-4", "telegram", "other", system_prompt="other prompt") == "ens-4"
    row = db.get_session("ens-4")
    assert (row["source"], row["model"], row["system_prompt"]) == ("cli", "kept", "kept prompt")


def test_ensure_session_fills_in_what_is_missing(db):
    db.ensure_session("ens-7")
    db.ensure_session("ens-7", "cli", "m-7", cwd="/w", chat_id="c")
    row = db.get_session("ens-7")
    assert (row["source"], row["model"], row["cwd"], row["chat_id"]) == ("unknown", "m-7", "/w", "c")


def test_ensure_session_rejects_unknown_keyword(db):
    with pytest.raises(TypeError):
        db.ensure_session("ens-5", "cli", flavour="x")
    assert db.get_session("ens-5") is None


def test_ensure_session_with_missing_parent_raises_integrity_error(db):
    with pytest.raises(sqlite3.IntegrityError):
        db.ensure_session("ens-6", parent_session_id="ghost-parent")


# --- end / reopen / system prompt ------------------------------------------------------------


def test_end_session_sets_reason_and_time(db):
    db.create_session("e1", "cli")
    before = time.time()
    db.end_session("e1", "user_exit")
    after = time.time()
    row = db.get_session("e1")
    assert row["end_reason"] == "user_exit"
    assert before <= row["ended_at"] <= after


def test_end_session_first_end_wins(db, raw):
    db.create_session("e2", "cli")
    db.end_session("e2", "compression")
    raw.execute("UPDATE sessions SET ended_at = 1234.5 WHERE id = 'e2'")
    db.end_session("e2", "user_exit")
    row = db.get_session("e2")
    assert (row["ended_at"], row["end_reason"]) == (1234.5, "compression")


def test_end_session_on_missing_session_is_a_no_op(db):
    assert db.end_session("missing", "user_exit") is None
    assert db.get_session("missing") is None
    assert db.session_count() == 0


def test_reopen_session_clears_end(db):
    db.create_session("e3", "cli")
    db.end_session("e3", "branched")
    assert db.reopen_session("e3") is None
    row = db.get_session("e3")
    assert (row["ended_at"], row["end_reason"]) == (None, None)
    db.end_session("e3", "resumed_other")
    assert db.get_session("e3")["end_reason"] == "resumed_other"


def test_reopen_session_on_live_or_missing_session(db):
    db.create_session("live", "cli")
    db.reopen_session("live")
    db.reopen_session("nobody")
    assert db.get_session("live")["ended_at"] is None
    assert db.get_session("nobody") is None


def test_update_system_prompt(db):
    db.create_session("sp1", "cli", system_prompt="old prompt")
    assert db.update_system_prompt("sp1", "new prompt\nwith two lines") is None
    assert db.get_session("sp1")["system_prompt"] == "new prompt\nwith two lines"


def test_update_system_prompt_missing_session_is_a_no_op(db):
    db.update_system_prompt("nobody", "x")
    assert db.session_count() == 0


# --- get_session -------------------------------------------------------------------------


def test_get_session_has_exactly_41_columns(db):
    db.create_session("g1", "cli")
    row = db.get_session("g1")
    assert set(row) == SESSION_KEYS
    assert len(row) == 41


def test_get_session_missing_returns_none(db):
    assert db.get_session("nope") is None


def test_get_session_returns_model_config_undecoded(db):
    db.create_session("g2", "cli", model_config={"a": [1, 2]})
    assert db.get_session("g2")["model_config"] == '{"a": [1, 2]}'


# --- resolve_session_id ------------------------------------------------------------------------


def test_resolve_exact_id(db):
    db.create_session("20260101_abc", "cli")
    assert db.resolve_session_id("20260101_abc") == "20260101_abc"


def test_resolve_exact_id_wins_over_longer_ids_sharing_the_prefix(db):
    db.create_session("abc", "cli")
    db.create_session("abcdef", "cli")
    assert db.resolve_session_id("abc") == "abc"


def test_resolve_unique_prefix(db):
    db.create_session("20260101_abc", "cli")
    db.create_session("20260202_xyz", "cli")
    assert db.resolve_session_id("202601") == "20260101_abc"


def test_resolve_ambiguous_prefix_returns_none(db):
    db.create_session("20260101_abc", "cli")
    db.create_session("20260101_abd", "cli")
    assert db.resolve_session_id("20260101_ab") is None


def test_resolve_unknown_prefix_returns_none(db):
    db.create_session("20260101_abc", "cli")
    assert db.resolve_session_id("zzz") is None


def test_resolve_percent_in_prefix_is_literal(db):
    db.create_session("only-one", "cli")
    assert db.resolve_session_id("%") is None
    db.create_session("50%-off", "cli")
    assert db.resolve_session_id("50%") == "50%-off"


def test_resolve_underscore_in_prefix_is_literal(db):
    db.create_session("taskX1", "cli")
    db.create_session("task_1", "cli")
    assert db.resolve_session_id("task_") == "task_1"
    assert db.resolve_session_id("taskX") == "taskX1"


def test_resolve_backslash_in_prefix_is_literal(db):
    db.create_session("dir\\sub-1", "cli")
    db.create_session("dirXsub-2", "cli")
    assert db.resolve_session_id("dir\\") == "dir\\sub-1"


def test_resolve_prefix_is_ascii_case_insensitive(db):
    # Upstream resolves through LIKE, which ignores ASCII case.
    db.create_session("only", "cli")
    assert db.resolve_session_id("ONL") == "only"


def test_resolve_empty_string_returns_none_even_with_one_session(db):
    db.create_session("the-only-session", "cli")
    assert db.resolve_session_id("") is None


# --- persistence, close ----------------------------------------------------------------------


def test_data_survives_close_and_reopen(tmp_path):
    path = tmp_path / "state.db"
    first = SessionDB(path)
    first.create_session("keep-me", "cli", model="m")
    first.append_message("keep-me", "user", "persisted words")
    first.close()
    second = SessionDB(path)
    try:
        assert second.get_session("keep-me")["model"] == "m"
        assert [m["content"] for m in second.get_messages("keep-me")] == ["persisted words"]
        assert [hit["id"] for hit in second.search_messages("persisted")] == [1]
    finally:
        second.close()


def test_close_twice_is_harmless(tmp_path):
    store = SessionDB(tmp_path / "state.db")
    store.close()
    store.close()


def test_use_after_close_raises(tmp_path):
    store = SessionDB(tmp_path / "state.db")
    store.create_session("x", "cli")
    store.close()
    # Upstream fails with AttributeError on its discarded connection; a clear error is fine.
    with pytest.raises((AttributeError, RuntimeError)):
        store.get_session("x")
    with pytest.raises((AttributeError, RuntimeError)):
        store.create_session("y", "cli")


def test_raw_connection_is_none_after_close(tmp_path):
    store = SessionDB(tmp_path / "state.db")
    assert store._conn is not None
    store.close()
    assert store._conn is None


def test_context_manager_closes(tmp_path):
    with SessionDB(tmp_path / "state.db") as store:
        store.create_session("cm", "cli")
    with pytest.raises((AttributeError, RuntimeError)):
        store.get_session("cm")


def test_class_constants():
    assert SessionDB.MAX_TITLE_LENGTH == 100
    assert SessionDB._WRITE_MAX_RETRIES == 15
    assert SessionDB._WRITE_RETRY_MIN_S == 0.020
    assert SessionDB._WRITE_RETRY_MAX_S == 0.150
    assert SessionDB._CHECKPOINT_EVERY_N_WRITES == 50
    assert SessionDB._CONTENT_JSON_PREFIX == "\x00json:"


def test_busy_timeout_is_one_second(db, raw):
    assert raw.one("PRAGMA busy_timeout") == 1000


def test_foreign_keys_and_wal_are_on(db, raw):
    assert raw.one("PRAGMA foreign_keys") == 1
    assert raw.one("PRAGMA journal_mode") == "wal"


def test_execute_write_runs_a_function_in_a_transaction(db):
    def work(conn):
        conn.execute("INSERT INTO state_meta(key, value) VALUES ('raw-key', 'raw-value')")
        return 42

    assert db._execute_write(work) == 42
    assert db.get_meta("raw-key") == "raw-value"


def test_execute_write_rolls_back_on_error(db):
    def work(conn):
        conn.execute("INSERT INTO state_meta(key, value) VALUES ('half', 'written')")
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        db._execute_write(work)
    assert db.get_meta("half") is None


# --- sharing -----------------------------------------------------------------------------------


def test_two_stores_on_one_file_see_each_others_writes(db, open_db):
    other = open_db()
    db.create_session("shared", "cli")
    other.append_message("shared", "user", "from the second store")
    db.append_message("shared", "assistant", "from the first store")
    for store in (db, other):
        assert [m["content"] for m in store.get_messages("shared")] == [
            "from the second store",
            "from the first store",
        ]
        assert store.get_session("shared")["message_count"] == 2


def test_concurrent_writers_lose_nothing(db, open_db):
    second = open_db()
    db.create_session("busy", "cli")
    errors: list[BaseException] = []

    def writer(store, name):
        try:
            for index in range(15):
                store.append_message("busy", "user", f"{name} message {index}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=writer, args=(store, f"w{n}"))
        for n, store in enumerate([db, db, second, second])
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    messages = db.get_messages("busy")
    assert len(messages) == 60
    assert len({m["id"] for m in messages}) == 60
    assert db.get_session("busy")["message_count"] == 60
    for n in range(4):
        mine = [m["content"] for m in messages if m["content"].startswith(f"w{n} ")]
        assert mine == [f"w{n} message {i}" for i in range(15)]


# --- default location ------------------------------------------------------------------------


def test_default_path_is_hermes_home_state_db(tmp_path, monkeypatch):
    home = tmp_path / "profile-home"
    monkeypatch.delenv("HERMES_STORE_URL", raising=False)
    monkeypatch.setenv("HERMES_HOME", f"  {home}  ")
    store = SessionDB()
    try:
        store.create_session("default-location", "cli")
    finally:
        store.close()
    assert (home / "state.db").exists()
    reopened = SessionDB(home / "state.db")
    try:
        assert reopened.get_session("default-location") is not None
    finally:
        reopened.close()
