"""Every statement of every public method is visible to SQLAlchemy's engine events.

The ground truth is the driver itself: new connections are made with a connection
(sqlite3) or cursor (psycopg) class that counts every ``execute``/``executemany`` the
driver is asked to run. A ``before_cursor_execute`` listener must see exactly as many
statements, for every public ``SessionDB`` method, on both backends — so no statement
takes a path around SQLAlchemy (echo, query counters and tracing would miss it).
"""

from __future__ import annotations

import inspect
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from sqlalchemy import event

from hermes_store import SessionDB

# Static helpers that run no SQL.
NO_SQL = {"sanitize_title"}


class DriverCount:
    """Statements the database driver was asked to run (executemany counts each row)."""

    value = 0

    @classmethod
    def add(cls, params: Iterable[Any] | None, many: bool) -> None:
        cls.value += len(list(params or [])) if many else 1


class CountingSQLiteCursor(sqlite3.Cursor):
    def execute(self, sql: str, parameters: Any = (), /) -> CountingSQLiteCursor:
        if getattr(self.connection, "counting", False):
            DriverCount.add(None, False)
        return super().execute(sql, parameters)  # type: ignore[return-value]

    def executemany(self, sql: str, seq: Iterable[Any], /) -> CountingSQLiteCursor:
        rows = list(seq)
        if getattr(self.connection, "counting", False):
            DriverCount.add(rows, True)
        return super().executemany(sql, rows)  # type: ignore[return-value]


class CountingSQLiteConnection(sqlite3.Connection):
    counting = False

    def cursor(self, factory: Any = CountingSQLiteCursor) -> Any:  # type: ignore[override]
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = (), /) -> Any:  # type: ignore[override]
        return self.cursor().execute(sql, parameters)


def _counting_psycopg_cursor() -> type[Any]:
    import psycopg

    class CountingCursor(psycopg.Cursor):  # type: ignore[type-arg]
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            # ";" is the pool's pre-ping (pool_pre_ping=True): SQLAlchemy's liveness probe
            # of a connection at checkout, not a statement of the store.
            if query != ";":
                DriverCount.add(None, False)
            return super().execute(query, params, **kwargs)

        def executemany(self, query: Any, params_seq: Iterable[Any], **kwargs: Any) -> Any:
            rows = list(params_seq)
            DriverCount.add(rows, True)
            return super().executemany(query, rows, **kwargs)

    return CountingCursor


def _arrange(db: SessionDB) -> None:
    """A little of everything: a compression chain, a branch, titles, tool calls, meta."""
    db.create_session("root", "cli", model="m1")
    db.append_message("root", "user", "how do I rotate the logs")
    db.append_message("root", "assistant", "use logrotate", tool_calls=[{"id": "t1"}], reasoning="hmm")
    db.append_message("root", "tool", "done", tool_call_id="t1", tool_name="shell")
    db.set_session_title("root", "logs")
    db.end_session("root", "compression")
    db.create_session("tip", "cli", parent_session_id="root")
    db.append_message("tip", "user", "and compress them 服务器日志")
    db.create_session("ghost", "tui")
    db.set_meta("k", "v")


# One call per public method, each after _arrange.
CALLS: dict[str, Callable[[SessionDB], object]] = {
    "append_message": lambda db: db.append_message("tip", "assistant", "ok", tool_calls=[{"id": "x"}]),
    "append_messages": lambda db: db.append_messages(
        "tip", [{"role": "assistant", "content": "ok", "tool_calls": [{"id": "y"}]}, {"role": "tool"}]
    ),
    "apply_telegram_topic_migration": lambda db: db.apply_telegram_topic_migration(),
    "archive_and_compact": lambda db: db.archive_and_compact("tip", [{"role": "user", "content": "summary"}]),
    "backfill_repo_roots": lambda db: db.backfill_repo_roots({"/work": "/work"}),
    "bind_telegram_topic": lambda db: db.bind_telegram_topic(
        chat_id=1, thread_id=2, user_id=3, session_key="k", session_id="tip"
    ),
    "claim_handoff": lambda db: (db.request_handoff("tip", "telegram"), db.claim_handoff("tip")),
    "clear_compression_failure_cooldown": lambda db: db.clear_compression_failure_cooldown("tip"),
    "clear_messages": lambda db: db.clear_messages("tip"),
    "close": lambda db: db.close(),
    "complete_handoff": lambda db: db.complete_handoff("tip"),
    "count_empty_sessions": lambda db: db.count_empty_sessions(),
    "create_session": lambda db: db.create_session("new", "cli", model_config={"a": 1}),
    "delete_empty_sessions": lambda db: db.delete_empty_sessions(),
    "delete_session": lambda db: db.delete_session("tip"),
    "delete_session_if_empty": lambda db: db.delete_session_if_empty("ghost"),
    "delete_sessions": lambda db: db.delete_sessions(["root", "ghost", "missing"]),
    "delete_telegram_topic_binding": lambda db: db.delete_telegram_topic_binding(chat_id=1, thread_id=2),
    "disable_telegram_topic_mode": lambda db: db.disable_telegram_topic_mode(chat_id=1),
    "distinct_session_cwds": lambda db: db.distinct_session_cwds(include_archived=True),
    "enable_telegram_topic_mode": lambda db: db.enable_telegram_topic_mode(chat_id=1, user_id=3),
    "end_session": lambda db: db.end_session("tip", "user_exit"),
    "ensure_session": lambda db: db.ensure_session("other"),
    "export_all": lambda db: db.export_all(),
    "export_session": lambda db: db.export_session("root"),
    "fail_handoff": lambda db: db.fail_handoff("tip", "gone"),
    "finalize_orphaned_compression_sessions": lambda db: db.finalize_orphaned_compression_sessions(),
    "find_latest_gateway_session_for_peer": lambda db: db.find_latest_gateway_session_for_peer(
        source="cli", session_key="k", chat_id="c", chat_type="dm"
    ),
    "get_anchored_view": lambda db: db.get_anchored_view(
        "root", db.get_messages("root")[1]["id"], window=0, bookend=1
    ),
    "get_ancestors": lambda db: db.get_ancestors("tip"),
    "get_compression_failure_cooldown": lambda db: db.get_compression_failure_cooldown("tip"),
    "get_compression_lock_holder": lambda db: db.get_compression_lock_holder("tip"),
    "get_compression_tip": lambda db: db.get_compression_tip("root"),
    "get_descendants": lambda db: db.get_descendants("root"),
    "get_handoff_state": lambda db: db.get_handoff_state("tip"),
    "get_messages": lambda db: db.get_messages("root"),
    "get_messages_around": lambda db: db.get_messages_around(
        "root", db.get_messages("root")[1]["id"], window=1
    ),
    "get_messages_as_conversation": lambda db: db.get_messages_as_conversation("tip", include_ancestors=True),
    "get_meta": lambda db: db.get_meta("k"),
    "get_next_title_in_lineage": lambda db: db.get_next_title_in_lineage("logs"),
    "get_session": lambda db: db.get_session("root"),
    "get_session_by_title": lambda db: db.get_session_by_title("logs"),
    "get_session_title": lambda db: db.get_session_title("root"),
    "get_telegram_topic_binding": lambda db: db.get_telegram_topic_binding(chat_id=1, thread_id=2),
    "get_telegram_topic_binding_by_session": lambda db: db.get_telegram_topic_binding_by_session(
        session_id="tip"
    ),
    "is_telegram_session_linked_to_topic": lambda db: db.is_telegram_session_linked_to_topic(
        session_id="tip"
    ),
    "is_telegram_topic_mode_enabled": lambda db: db.is_telegram_topic_mode_enabled(chat_id=1, user_id=3),
    "has_archived_messages": lambda db: db.has_archived_messages("tip"),
    "has_platform_message_id": lambda db: db.has_platform_message_id("tip", "p1"),
    "list_cron_job_runs": lambda db: db.list_cron_job_runs("nightly"),
    "list_recent_user_messages": lambda db: db.list_recent_user_messages("root"),
    "list_pending_handoffs": lambda db: db.list_pending_handoffs(),
    "list_sessions_rich": lambda db: db.list_sessions_rich(),
    "list_telegram_topic_bindings_for_chat": lambda db: db.list_telegram_topic_bindings_for_chat(chat_id=1),
    "list_unlinked_telegram_sessions_for_user": lambda db: db.list_unlinked_telegram_sessions_for_user(
        chat_id=1, user_id=3
    ),
    "maybe_auto_prune_and_vacuum": lambda db: db.maybe_auto_prune_and_vacuum(retention_days=0),
    "message_count": lambda db: db.message_count("root"),
    "optimize_fts": lambda db: db.optimize_fts(),
    "prune_empty_ghost_sessions": lambda db: db.prune_empty_ghost_sessions(),
    "prune_sessions": lambda db: db.prune_sessions(older_than_days=0),
    "record_compression_failure_cooldown": lambda db: db.record_compression_failure_cooldown(
        "tip", 1e10, "x"
    ),
    "record_gateway_session_peer": lambda db: db.record_gateway_session_peer(
        "tip", source="cli", session_key="k"
    ),
    "refresh_compression_lock": lambda db: db.refresh_compression_lock("tip", "me"),
    "release_compression_lock": lambda db: db.release_compression_lock("tip", "me"),
    "reopen_session": lambda db: db.reopen_session("root"),
    "replace_messages": lambda db: db.replace_messages(
        "tip", [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    ),
    "request_handoff": lambda db: db.request_handoff("tip", "telegram"),
    "restore_rewound": lambda db: db.restore_rewound("root", 0),
    "resolve_resume_session_id": lambda db: db.resolve_resume_session_id("ghost"),
    "resolve_session_by_title": lambda db: db.resolve_session_by_title("logs"),
    "resolve_session_id": lambda db: db.resolve_session_id("ro"),
    "rewind_to_message": lambda db: db.rewind_to_message("tip", db.get_messages("tip")[0]["id"]),
    "search_messages": lambda db: (
        db.search_messages("logrotate"),
        db.search_messages("服务器"),
        db.search_messages("日志"),
        db.search_messages("logs", source_filter=["cli"], role_filter=["user"]),
    ),
    "search_sessions": lambda db: db.search_sessions(),
    "search_sessions_by_id": lambda db: db.search_sessions_by_id("ro"),
    "session_count": lambda db: db.session_count(),
    "set_meta": lambda db: db.set_meta("k", "w"),
    "set_session_archived": lambda db: db.set_session_archived("root", True),
    "set_session_title": lambda db: db.set_session_title("tip", "logs #2"),
    "try_acquire_compression_lock": lambda db: db.try_acquire_compression_lock("tip", "me"),
    "update_system_prompt": lambda db: db.update_system_prompt("tip", "be brief"),
    "update_token_counts": lambda db: db.update_token_counts("tip", 5, 7, model="m2"),
    "update_session_billing_route": lambda db: db.update_session_billing_route(
        "tip", provider="p", base_url="u"
    ),
    "update_session_cwd": lambda db: db.update_session_cwd("tip", "/work", git_branch="main"),
    "update_session_meta": lambda db: db.update_session_meta("tip", "{}", model="m3"),
    "update_session_model": lambda db: db.update_session_model("tip", "m3"),
    "vacuum": lambda db: db.vacuum(),
}
# On PostgreSQL these legitimately run nothing: the server checkpoints on its own.
# optimize_fts: PostgreSQL's search indexes need no segment merging.
NOTHING_TO_RUN_ON_POSTGRES = {"close", "optimize_fts"}


def test_every_public_method_is_covered() -> None:
    public = {name for name, value in inspect.getmembers(SessionDB) if not name.startswith("_")}
    public = {name for name in public if callable(getattr(SessionDB, name))} - NO_SQL
    assert public == set(CALLS)


def _reopen_counting(db: SessionDB, backend: str) -> SessionDB:
    """The same store opened afresh, every later connection counting what its driver runs.

    Statements a new connection runs while the pool sets it up (SQLite's pragmas, the
    PostgreSQL dialect's probes) happen before SQLAlchemy has a connection to report
    them on; they are not counted, on either side.
    """
    target = db.engine.url.render_as_string(hide_password=False)
    db.close()
    store = SessionDB(url=target)
    store.engine.dispose()  # the connection used to open it does not count; new ones will

    @event.listens_for(store.engine, "do_connect")
    def _counting_class(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
        if backend == "sqlite":
            cparams["factory"] = CountingSQLiteConnection

    @event.listens_for(store.engine, "connect")
    def _set_up(dbapi_connection: Any, record: Any) -> None:
        # Registered after the store's own connect listener, so it runs after its pragmas.
        if backend == "sqlite":
            dbapi_connection.counting = True
        else:
            dbapi_connection.cursor_factory = _counting_psycopg_cursor()

    return store


@pytest.mark.parametrize("method", sorted(CALLS))
def test_every_statement_reaches_the_engine_events(db: SessionDB, backend: str, method: str) -> None:
    _arrange(db)
    store = _reopen_counting(db, backend)
    seen: list[str] = []

    @event.listens_for(store.engine, "before_cursor_execute")
    def _count(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        seen.extend([statement] * (len(params) if many else 1))

    DriverCount.value = 0
    try:
        CALLS[method](store)
    finally:
        store.close()
    if not (backend == "postgresql" and method in NOTHING_TO_RUN_ON_POSTGRES):
        assert len(seen) > 0
    assert len(seen) == DriverCount.value, seen
