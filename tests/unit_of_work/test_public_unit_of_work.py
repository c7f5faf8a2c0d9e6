"""The public unit of work as the README documents it, and the CLI's use of public API only."""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import event, orm
from sqlalchemy.engine import Connection
from support import REPO_ROOT

from hermes_store import SessionDB
from hermes_store.repository import messages, meta, sessions


def readme_block(heading: str) -> str:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(heading, 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, f"no python block under {heading}"
    return match.group(1)


def test_the_readme_example_runs_and_commits_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(readme_block("### Composing writes"), "README.md", "exec"), {})
    with closing(sqlite3.connect(tmp_path / "state.db")) as conn:
        assert conn.execute("SELECT id, message_count FROM sessions").fetchall() == [("sess_2", 1)]
        assert conn.execute("SELECT value FROM state_meta WHERE key = 'last_session'").fetchone() == (
            "sess_2",
        )


def test_a_composed_write_that_fails_leaves_nothing(db_path: Path) -> None:
    db = SessionDB(db_path)

    def half_then_fail(s: orm.Session) -> None:
        sessions.insert_session(s, "s", "cli")
        messages.append(s, "s", messages.NewMessage(role="user", content="first"))
        raise RuntimeError("the service changed its mind")

    with pytest.raises(RuntimeError, match="changed its mind"):
        db.unit_of_work.write(half_then_fail, "a composed write")
    assert db.get_session("s") is None and db.message_count() == 0
    db.close()
    with pytest.raises(RuntimeError, match="closed"):
        _ = db.unit_of_work


def cli_lines_matching(pattern: str) -> list[str]:
    cli = REPO_ROOT / "hermes_store" / "cli"
    found = re.compile(pattern)
    return [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(cli.glob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if found.search(line)
    ]


def test_the_cli_uses_no_private_sessiondb_attribute() -> None:
    found = cli_lines_matching(r"\bdb\._[a-z]")
    assert found == [], os.linesep.join(found)


def test_the_cli_runs_no_sql_of_its_own() -> None:
    # Its queries live in hermes_store.repository (and .doctor, .backup); the CLI prints.
    found = cli_lines_matching(r"exec_driver_sql|(?<![.\w])(?:select|insert|update|delete|text)\(|PRAGMA")
    assert found == [], os.linesep.join(found)


def test_write_connection_composes_repository_calls_on_a_core_connection(db_path: Path) -> None:
    db = SessionDB(db_path)

    def start(conn: Connection) -> int:
        sessions.insert_session(conn, "s", "cli")
        first = messages.append(conn, "s", messages.NewMessage(role="user", content="hi"))
        second = messages.append(
            conn,
            "s",
            messages.NewMessage(
                role="assistant", content="ok", tool_calls='[{"id": "c1"}]', tool_call_units=1
            ),
        )
        assert second == first + 1
        meta.put(conn, "last", "s")
        return second

    last_id = db.unit_of_work.write_connection(start, "starting")
    row = db.get_session("s")
    assert row is not None and (row["message_count"], row["tool_call_count"]) == (2, 1)
    assert [m["id"] for m in db.get_messages("s")][-1] == last_id
    assert db.get_meta("last") == "s"

    def half_then_fail(conn: Connection) -> None:
        messages.append(conn, "s", messages.NewMessage(role="user", content="lost"))
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        db.unit_of_work.write_connection(half_then_fail, "failing")
    assert db.message_count("s") == 2
    db.close()


def test_write_connection_retries_while_another_connection_holds_the_lock(db_path: Path) -> None:
    db = SessionDB(db_path)
    db.create_session("s", "cli")
    holder = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    # Held longer than the 1 s busy timeout: only a retry of the whole write gets through.
    timer = threading.Timer(1.5, lambda: holder.execute("ROLLBACK"))
    timer.start()
    try:
        new_id = db.unit_of_work.write_connection(
            lambda conn: messages.append(conn, "s", messages.NewMessage(role="user", content="later")),
            "appending after a wait",
        )
    finally:
        timer.join()
        holder.close()
    assert db.get_messages("s")[-1]["id"] == new_id
    assert db.message_count("s") == 1
    db.close()


@pytest.mark.parametrize("method", ["write", "write_connection"])
def test_every_nth_write_checkpoints_the_wal_on_the_write_connection(db_path: Path, method: str) -> None:
    from hermes_store.uow.unit_of_work import UnitOfWork

    db = SessionDB(db_path)
    db.create_session("s", "cli")
    uow = UnitOfWork(db.engine, checkpoint_every=5, owns_engine=False)
    seen: list[tuple[str, int]] = []

    def note(conn: Connection, cursor: object, statement: str, *rest: object) -> None:
        seen.append((statement, id(conn.connection.driver_connection)))

    event.listen(db.engine, "before_cursor_execute", note)
    for n in range(10):
        getattr(uow, method)(
            lambda db, n=n: messages.append(db, "s", messages.NewMessage(role="user", content=f"m{n}")),
            "appending",
        )
    event.remove(db.engine, "before_cursor_execute", note)
    writer = {driver for statement, driver in seen if statement.startswith("BEGIN IMMEDIATE")}
    checkpoints = [driver for statement, driver in seen if "wal_checkpoint" in statement]
    assert len(checkpoints) == 2 and set(checkpoints) == writer  # after writes 5 and 10
    uow.close()
    assert db.message_count("s") == 10
    db.close()


def test_a_unit_of_work_kept_past_close_refuses_to_write_or_read(db_path: Path) -> None:
    db = SessionDB(db_path)
    uow = db.unit_of_work
    db.create_session("s", "cli")
    db.close()
    opened: list[object] = []
    event.listen(db.engine, "connect", lambda dbapi_connection, record: opened.append(dbapi_connection))

    def insert_meta(connection: Connection) -> None:
        meta.put(connection, "after-close", "x")

    with pytest.raises(RuntimeError, match="this SessionDB is closed"):
        uow.write_connection(insert_meta, "writing after close")
    with pytest.raises(RuntimeError, match="this SessionDB is closed"):
        uow.write(lambda s: meta.put(s, "after-close", "y"), "writing after close")
    with pytest.raises(RuntimeError, match="this SessionDB is closed"), uow.read_connection():
        pass
    with pytest.raises(RuntimeError, match="this SessionDB is closed"), uow.read():
        pass
    assert opened == []  # nothing was opened for them, so nothing is left open
    with closing(sqlite3.connect(db_path)) as conn:
        assert conn.execute("SELECT value FROM state_meta WHERE key = 'after-close'").fetchall() == []
