"""The execution seam on a real SQLite file: both ways in give the same rows and errors."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, exc
from sqlalchemy.engine import Connection

from hermes_store import SessionDB
from hermes_store.db import driver_style, driver_transaction, execution, sqlalchemy_private
from hermes_store.db.execution_options import NO_BEGIN_OPTION
from hermes_store.db.statement_caches import LRUCache


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionDB]:
    db = SessionDB(tmp_path / "state.db")
    for index in range(3):
        db.create_session(f"s{index}", "cli")
        db.append_message(f"s{index}", "user", f"hello {index}")
    db.append_message("s0", "user", ["a", {"type": "text", "text": "multimodal"}])
    try:
        yield db
    finally:
        db.close()


@pytest.fixture
def connection(store: SessionDB) -> Iterator[Connection]:
    with store._uow.read_connection() as conn:
        yield conn


def _count_statements(store: SessionDB) -> list[str]:
    seen: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *args: seen.append(args[2]))
    return seen


LEAN_SQL = "SELECT id, session_id, content FROM messages WHERE session_id = :a OR session_id = :b ORDER BY id"
IN_SQL = "SELECT id, session_id, content FROM messages WHERE session_id IN :ids ORDER BY id"


def test_an_in_list_expands_through_core_and_matches_the_lean_path(connection: Connection) -> None:
    lean = execution.fetch_dicts(connection, LEAN_SQL, {"a": "s0", "b": "s2"}, content_keys=("content",))
    first = execution.fetch_dicts(connection, IN_SQL, {"ids": ["s0", "s2"]}, content_keys=("content",))
    again = execution.fetch_dicts(connection, IN_SQL, {"ids": ("s0", "s2")}, content_keys=("content",))
    assert [row["session_id"] for row in lean] == ["s0", "s2", "s0"]
    assert isinstance(lean[-1]["content"], str) and lean[-1]["content"].startswith("\x00json:")
    assert first == lean
    assert again == lean  # the second run reuses the statement with declared columns


def test_an_empty_in_list_matches_nothing(connection: Connection) -> None:
    assert execution.fetch_tuples(connection, IN_SQL, {"ids": []}) == []


def test_a_list_outside_in_is_one_parameter(store: SessionDB, connection: Connection) -> None:
    from hermes_store.db.backends import backend_for

    backend = backend_for(connection)
    sql = f"SELECT id FROM sessions WHERE {backend.in_list('id', 'ids')} ORDER BY id"
    rows = execution.fetch_tuples(connection, sql, {"ids": backend.list_value(["s1", "s2", "nope"])})
    assert rows == [("s1",), ("s2",)]


@pytest.mark.parametrize("private", [True, False])
def test_driver_sql_runs_with_and_without_sqlalchemys_private_members(
    store: SessionDB, monkeypatch: pytest.MonkeyPatch, private: bool
) -> None:
    """Without the SQLAlchemy internals the bare-cursor path uses, exec_driver_sql does the same."""
    monkeypatch.setattr(sqlalchemy_private, "AVAILABLE", private)
    seen = _count_statements(store)
    new_id = store.append_message("s1", "assistant", "again")
    assert store.get_messages("s1")[-1]["id"] == new_id
    assert any(statement.startswith("INSERT INTO messages") for statement in seen)
    with store._uow.read_connection() as conn:
        assert execution.driver_execute(conn, "PRAGMA user_version=0").rows == []


@pytest.mark.parametrize("with_list", [False, True])
def test_a_failing_statement_raises_sqlalchemys_error_on_both_paths(
    connection: Connection, with_list: bool
) -> None:
    params: dict[str, Any] = {"ids": ["s0"]} if with_list else {"a": "s0"}
    where = "session_id IN :ids" if with_list else "session_id = :a"
    with pytest.raises(exc.OperationalError, match="no such table"):
        execution.fetch_dicts(connection, f"SELECT * FROM missing_table WHERE {where}", params)


def test_scalar_text_and_run(connection: Connection) -> None:
    from sqlalchemy import func, select

    from hermes_store.models import Session

    assert execution.scalar_text(connection, select(Session.id).where(Session.id == "s1")) == "s1"
    assert execution.scalar_text(connection, select(Session.id).where(Session.id == "none")) is None
    assert execution.run(connection, select(func.count()).select_from(Session)).scalar_one() == 3


def test_listeners_added_or_removed_later_switch_between_fast_and_observed_paths(store: SessionDB) -> None:
    """No listener: statements skip the execution context; one added later sees every
    statement at once, and removing it brings the fast path back with the same results."""
    quiet_id = store.append_message("s1", "user", "unobserved")
    seen: list[str] = []

    def note(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        seen.append(statement)

    event.listen(store.engine, "before_cursor_execute", note)
    watched_id = store.append_message("s1", "user", "observed")
    event.remove(store.engine, "before_cursor_execute", note)
    after_id = store.append_message("s1", "user", "unobserved again")
    # The write transaction is the driver's: its BEGIN and COMMIT are statements too.
    assert [s.split()[0] for s in seen] == ["BEGIN", "INSERT", "UPDATE", "COMMIT"]
    assert seen[-2].startswith("UPDATE sessions SET message_count")
    assert quiet_id < watched_id < after_id
    assert [m["id"] for m in store.get_messages("s1")][-3:] == [quiet_id, watched_id, after_id]


def test_the_fast_path_wraps_driver_errors_like_sqlalchemy(connection: Connection) -> None:
    with pytest.raises(exc.IntegrityError) as caught:
        execution.driver_execute(
            connection,
            "INSERT INTO sessions (id, source) VALUES (:id, :source)",
            {"id": "s0", "source": "cli"},
        )
    assert caught.value.statement is not None and "INSERT INTO sessions" in caught.value.statement
    assert connection.in_transaction()  # the lean path began the transaction it ran in


def test_a_listener_on_one_connection_sees_the_statements_of_its_next_transaction(store: SessionDB) -> None:
    """The way is decided as a transaction begins (route_choice.remember_route): a listener
    added inside one sees every statement from the next transaction on."""
    with store._uow.read_connection() as conn:
        assert sqlalchemy_private.route(conn) is sqlalchemy_private.Route.BARE_CURSOR
        seen: list[str] = []
        event.listen(conn, "before_cursor_execute", lambda *args: seen.append(args[2]))
        assert sqlalchemy_private.route(conn) is sqlalchemy_private.Route.DRIVER_SQL
        execution.fetch_tuples(conn, "SELECT id FROM sessions WHERE id = :id", {"id": "s1"})
        assert seen == []  # this transaction began before the listener was there
        conn.rollback()
        execution.fetch_tuples(conn, "SELECT id FROM sessions WHERE id = :id", {"id": "s1"})
        assert len(seen) == 1 and "FROM sessions" in seen[0]


def test_a_statement_on_a_closed_driver_connection_raises_sqlalchemys_error(store: SessionDB) -> None:
    """Even the cursor's creation failing is wrapped (one error family), and the
    connection is left for the pool to replace."""
    connection = store.engine.connect()
    try:
        connection.connection.dbapi_connection.close()  # type: ignore[union-attr]
        with pytest.raises(exc.ProgrammingError, match="closed"):
            execution.driver_execute(connection, "SELECT 1", begin=False)
    finally:
        connection.invalidate()
        connection.close()
    assert store.message_count() == 4  # the store itself is unaffected


def test_execute_events_and_do_execute_see_every_statement_of_an_append(store: SessionDB) -> None:
    """A listener on before_execute/after_execute (or the dialect's do_execute) sends the
    hand-written SQL through Connection.execute, which fires them all, in order."""
    seen: list[tuple[str, str]] = []

    def before(conn: Any, statement: Any, *rest: Any) -> None:
        seen.append(("before", str(statement).split()[0]))

    def after(conn: Any, statement: Any, *rest: Any) -> None:
        seen.append(("after", str(statement).split()[0]))

    def do_execute(cursor: Any, statement: str, parameters: Any, context: Any) -> None:
        seen.append(("do_execute", statement.split()[0]))  # returns None: the dialect still runs it

    event.listen(store.engine, "before_execute", before)
    event.listen(store.engine, "after_execute", after)
    store.append_message("s1", "user", "seen by the execute events")
    event.remove(store.engine, "before_execute", before)
    event.remove(store.engine, "after_execute", after)
    event.listen(store.engine, "do_execute", do_execute)
    store.append_message("s1", "user", "seen by do_execute")
    event.remove(store.engine, "do_execute", do_execute)
    store.append_message("s1", "user", "seen by nobody")
    assert seen == [
        ("before", "BEGIN"),
        ("after", "BEGIN"),
        ("before", "INSERT"),
        ("after", "INSERT"),
        ("before", "UPDATE"),
        ("after", "UPDATE"),
        ("before", "COMMIT"),
        ("after", "COMMIT"),
        ("do_execute", "BEGIN"),
        ("do_execute", "INSERT"),
        ("do_execute", "UPDATE"),
        ("do_execute", "COMMIT"),
    ]
    assert [m["content"] for m in store.get_messages("s1")][-3:] == [
        "seen by the execute events",
        "seen by do_execute",
        "seen by nobody",
    ]


def test_a_handle_error_listener_gets_the_execution_context(store: SessionDB) -> None:
    contexts: list[Any] = []
    event.listen(store.engine, "handle_error", lambda ctx: contexts.append(ctx.execution_context))
    missing = "SELECT * FROM missing_table WHERE id = :id"
    no_table = pytest.raises(exc.OperationalError, match="no such table")
    with store._uow.read_connection() as connection, no_table:
        execution.driver_execute(connection, missing, {"id": 1})
    assert len(contexts) == 1 and contexts[0] is not None
    assert "missing_table" in contexts[0].statement


def test_echo_logs_every_driver_statement(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    with SessionDB(tmp_path / "echo.db", echo=True) as db:
        db.create_session("s", "cli")
        with caplog.at_level(logging.INFO, logger="sqlalchemy.engine"):
            db.append_message("s", "user", "logged")
    logged = [record.getMessage() for record in caplog.records]
    assert any(line.startswith("INSERT INTO messages") for line in logged), logged
    assert any(line.startswith("UPDATE sessions") for line in logged), logged


@pytest.mark.parametrize(
    ("version", "checked"),
    [
        ("2.0.44", True),
        ("2.1.9", True),
        ("2.1.0b1", True),
        ("2.2.0", False),
        ("3.0.0", False),
        ("1.4.54", False),
    ],
)
def test_private_members_are_used_only_on_checked_releases(version: str, checked: bool) -> None:
    assert sqlalchemy_private.supported(version) is checked


def test_the_installed_sqlalchemy_uses_the_bare_cursor_path() -> None:
    """CI runs this on the lowest and the newest SQLAlchemy pyproject allows: both must
    keep the fast path (a silent fallback would cost every append ~30 µs)."""
    import sqlalchemy

    assert sqlalchemy_private.AVAILABLE, f"SQLAlchemy {sqlalchemy.__version__} lost the fast path"


def test_the_driver_sql_cache_stays_bounded_however_many_query_shapes(connection: Connection) -> None:
    """Each search query shape is a new SQL text: the cache keeps the most recent ones,
    and a statement in constant use stays in it."""
    for index in range(700):  # more shapes than the cache holds (512)
        sql = f"SELECT id FROM sessions WHERE id = :id AND {index} = {index}"
        assert execution.fetch_tuples(connection, sql, {"id": "s1"}) == [("s1",)]
        if index % 50 == 0:
            execution.fetch_tuples(connection, LEAN_SQL, {"a": "s0", "b": "s2"})
    styles = driver_style.styles_for(connection.dialect)
    assert len(styles) <= 512
    assert LEAN_SQL in styles.recent or LEAN_SQL in styles.older


def test_lru_cache_evicts_the_least_recently_used() -> None:
    cache: LRUCache[str, int] = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # now the most recently used
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c"), len(cache)) == (1, None, 3, 2)


def test_commit_and_rollback_listeners_see_sqlites_driver_run_write_transactions(store: SessionDB) -> None:
    """Writes on SQLite are the driver's transactions; a commit or rollback listener (and
    nothing else) still gets one event per write, through SQLAlchemy's bookkeeping."""
    ends: list[str] = []
    event.listen(store.engine, "commit", lambda _conn: ends.append("commit"))
    event.listen(store.engine, "rollback", lambda _conn: ends.append("rollback"))
    store.append_message("s1", "user", "one")
    store.append_message("s1", "user", "two")
    assert ends == ["commit", "commit"]
    ends.clear()
    with pytest.raises(sqlite3.IntegrityError):
        store.append_message("no such session", "user", "refused")
    assert ends == ["rollback"]
    assert [m["content"] for m in store.get_messages("s1")][-2:] == ["one", "two"]


def test_a_driver_transaction_needs_a_connection_whose_sqlalchemy_transactions_send_no_begin(
    store: SessionDB,
) -> None:
    connection = store.engine.connect()
    try:
        with pytest.raises(ValueError, match=NO_BEGIN_OPTION):
            driver_transaction.begin_driver_transaction(connection, "BEGIN IMMEDIATE")
        assert not driver_transaction.in_driver_transaction(connection)
    finally:
        connection.close()


def test_ending_a_driver_transaction_that_was_never_begun_says_so(store: SessionDB) -> None:
    connection = store.engine.connect().execution_options(**{NO_BEGIN_OPTION: True})
    try:
        with pytest.raises(ValueError, match="no driver transaction is open"):
            driver_transaction.end_driver_transaction(connection, commit=True)
    finally:
        connection.close()


def test_statements_after_a_failed_one_in_a_driver_transaction_run_on_a_new_cursor(
    store: SessionDB,
) -> None:
    """The statements of a driver-run transaction share one cursor; SQLAlchemy's error
    handling closes it when one fails, and the rest of the transaction (here its
    ROLLBACK, then the next write) must not meet a closed cursor."""
    with pytest.raises(sqlite3.IntegrityError):
        store.append_message("no such session", "user", "refused")
    store.create_session("after", "cli")
    assert store.append_message("after", "user", "kept") > 0
    assert [m["content"] for m in store.get_messages("after")] == ["kept"]


@pytest.fixture(params=["sqlite", "postgresql"])
def warm_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionDB]:
    """A store that has written and read already: its write connection (and on SQLite its
    idle read connections) are kept, made while nothing logged statements."""
    if request.param == "postgresql":
        db = SessionDB(url=request.getfixturevalue("pg_head_url"))
    else:
        db = SessionDB(tmp_path / "state.db")
    db.create_session("s", "cli")
    for index in range(3):
        db.append_message("s", "user", f"before {index}")
        db.get_messages("s")
    try:
        yield db
    finally:
        db.close()


def _logged_statements(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("sqlalchemy.engine")]


def _append_and_read(db: SessionDB) -> None:
    db.append_message("s", "user", "while logging")
    db.get_messages("s")


def test_the_engine_logger_switched_on_after_open_shows_the_stores_statements(
    warm_store: SessionDB, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    with caplog.at_level(logging.INFO, logger="sqlalchemy.engine"):
        _append_and_read(warm_store)
    logged = _logged_statements(caplog)
    assert any(line.startswith("INSERT INTO messages") for line in logged), logged
    assert any(line.startswith("SELECT") and "FROM messages" in line for line in logged), logged
    caplog.clear()
    _append_and_read(warm_store)  # switched off again: nothing more is logged
    assert _logged_statements(caplog) == []


def test_echo_switched_on_after_open_shows_the_stores_statements(
    warm_store: SessionDB, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    caplog.set_level(logging.DEBUG)  # capture whatever reaches the root logger
    warm_store.engine.echo = True
    try:
        _append_and_read(warm_store)
    finally:
        warm_store.engine.echo = False
    logged = _logged_statements(caplog)
    assert any(line.startswith("INSERT INTO messages") for line in logged), logged
    caplog.clear()
    _append_and_read(warm_store)
    assert _logged_statements(caplog) == []
