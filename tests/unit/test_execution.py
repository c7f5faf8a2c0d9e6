"""The execution seam on a real SQLite file: both ways in give the same rows and errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, exc
from sqlalchemy.engine import Connection

from hermes_store import SessionDB
from hermes_store.db import execution


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


@pytest.mark.parametrize("lean", [True, False])
def test_driver_sql_runs_with_and_without_the_lean_path(
    store: SessionDB, monkeypatch: pytest.MonkeyPatch, lean: bool
) -> None:
    """Without the SQLAlchemy internals the lean path uses, exec_driver_sql does the same."""
    monkeypatch.setattr(execution, "_LEAN", lean)
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
    assert [s.split()[0] for s in seen] == ["BEGIN", "INSERT", "UPDATE"]
    assert seen[-1].startswith("UPDATE sessions SET message_count")
    assert quiet_id < watched_id < after_id
    assert [m["id"] for m in store.get_messages("s1")][-3:] == [quiet_id, watched_id, after_id]


def test_the_fast_path_wraps_driver_errors_like_sqlalchemy(connection: Connection) -> None:
    with pytest.raises(exc.IntegrityError) as caught:
        execution.run_driver_sql(
            connection,
            "INSERT INTO sessions (id, source) VALUES (:id, :source)",
            {"id": "s0", "source": "cli"},
        )
    assert caught.value.statement is not None and "INSERT INTO sessions" in caught.value.statement
    assert connection.in_transaction()  # the lean path began the transaction it ran in


def test_a_listener_on_one_connection_sees_its_statements(store: SessionDB) -> None:
    with store._uow.read_connection() as conn:
        assert execution._watched(conn.dispatch) is False
        seen: list[str] = []
        event.listen(conn, "before_cursor_execute", lambda *args: seen.append(args[2]))
        assert execution._watched(conn.dispatch) is True
        execution.fetch_tuples(conn, "SELECT id FROM sessions WHERE id = :id", {"id": "s1"})
        assert any("FROM sessions" in statement for statement in seen)


def test_a_statement_on_a_closed_driver_connection_raises_sqlalchemys_error(store: SessionDB) -> None:
    """Even the cursor's creation failing is wrapped (one error family), and the
    connection is left for the pool to replace."""
    connection = store.engine.connect()
    try:
        connection.connection.dbapi_connection.close()  # type: ignore[union-attr]
        with pytest.raises(exc.ProgrammingError, match="closed"):
            execution.driver_execute(connection, "SELECT 1", (), begin=False)
    finally:
        connection.invalidate()
        connection.close()
    assert store.message_count() == 4  # the store itself is unaffected


def test_a_failed_statement_is_wrapped_even_when_no_context_can_be_built(
    connection: Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dead server connection refuses the cursor the context needs: the error is then
    wrapped without one, never replaced by the second failure."""

    def refuse(*args: Any) -> None:
        raise RuntimeError("the connection is closed")

    monkeypatch.setattr(execution, "_context", refuse)
    with pytest.raises(exc.OperationalError, match="no such table"):
        execution.driver_execute(connection, "SELECT * FROM missing_table")
