"""A copy the operator can always finish, and a half-copied target nobody uses by mistake.

A copy is stopped mid-way (a real ``hermes-store copy`` subprocess SIGKILLed once some
batches are committed, or, for the states reached the same way from there, a copy stopped
by an exception after as many batches), and the target is then left as it is or emptied
by hand in each way an operator might: rows deleted, the copy's bookkeeping dropped,
tables dropped. From
every such state the operator runs the copy again and follows the one line each refusal
prints: every refusal names a command, and the command it names finishes the copy with
the source's rows exactly. Meanwhile, opening the target as a store is refused in one
line naming the command that finishes the copy.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from copy_support import assert_same_store, fill_head_extras, fill_store, kill_copy_after

from hermes_store import SessionDB
from hermes_store.admin.transfer import copy_store
from hermes_store.cli import cli
from hermes_store.db.engine import create_engine
from hermes_store.errors import CopyUnfinished

pytestmark = pytest.mark.postgres

SESSIONS, PER_SESSION = 30, 40
KILLED_AFTER = 60
"""Messages committed in the target when the copy is killed (three batches of 20)."""


def run_sql(url: str, *statements: str) -> None:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as connection:
            for statement in statements:
                connection.exec_driver_sql(statement)
    finally:
        engine.dispose()


def has_table(url: str, name: str) -> bool:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        return sa.inspect(engine).has_table(name)
    finally:
        engine.dispose()


def follow_the_advice(source: str, target: str) -> list[str]:
    """Run ``hermes-store copy SOURCE TARGET`` as an operator does: after a refusal, run
    the command its line names. Returns the refusals met; fails the test when one names
    no command, or when the named commands do not finish the copy within three runs."""
    runner = CliRunner()
    refusals: list[str] = []
    flags: list[str] = []
    for _ in range(3):
        result = runner.invoke(cli, ["copy", source, target, "--batch-size", "200", *flags])
        if result.exit_code == 0:
            return refusals
        lines = result.output.strip().splitlines()
        assert result.exception is None or isinstance(result.exception, SystemExit), result.output
        refusal = lines[-1]
        assert len(lines) == 1 and refusal.startswith("Error: "), result.output
        refusals.append(refusal)
        named = re.findall(r"run the same copy with (--resume|--restart)", refusal)
        assert named, f"the refusal names no command: {refusal}"
        flags = [named[0]]
    raise AssertionError(f"the commands the refusals named never finished the copy: {refusals}")


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A SQLite store that never used Telegram topic mode: its ``state_meta`` lacks the
    topic-schema key a PostgreSQL store writes when its schema is created."""
    path = tmp_path / "source.db"
    fill_store(path, SESSIONS, PER_SESSION)
    return path


def _left_as_it_is(url: str) -> None:
    pass


def _rows_deleted(url: str) -> None:
    run_sql(url, "DELETE FROM messages", "DELETE FROM sessions", "DELETE FROM state_meta")


def _rows_deleted_and_bookkeeping_dropped(url: str) -> None:
    _rows_deleted(url)
    run_sql(url, "DROP TABLE hermes_copy_state")


def _bookkeeping_dropped(url: str) -> None:
    run_sql(url, "DROP TABLE hermes_copy_state")


def _store_tables_dropped(url: str) -> None:
    run_sql(url, "DROP TABLE messages, sessions CASCADE")


def _every_table_dropped(url: str) -> None:
    run_sql(url, "DROP SCHEMA public CASCADE", "CREATE SCHEMA public")


HAND_EMPTIED: dict[str, Callable[[str], None]] = {
    "killed": _left_as_it_is,
    "rows deleted": _rows_deleted,
    "rows deleted, bookkeeping dropped": _rows_deleted_and_bookkeeping_dropped,
    "bookkeeping dropped": _bookkeeping_dropped,
    "sessions and messages tables dropped": _store_tables_dropped,
    "every table dropped": _every_table_dropped,
}
KILLED_FOR_REAL = ("killed", "rows deleted, bookkeeping dropped")
"""States reached from a SIGKILLed ``hermes-store copy`` subprocess (the others from a copy
stopped by an exception after as many batches: the same rows and bookkeeping, sooner)."""


class Interrupt(Exception):
    """Stops a copy in the middle of its messages."""


def _stop_after_messages(step: str, done: int, total: int | None) -> None:
    if step == "messages" and done >= KILLED_AFTER:
        raise Interrupt


def interrupt_copy(source: str | Path, target: str, *, kill: bool) -> None:
    """Leave ``target`` holding a copy stopped after :data:`KILLED_AFTER` messages."""
    if kill:
        kill_copy_after(source, target, KILLED_AFTER)
        return
    with pytest.raises(Interrupt):
        copy_store(create_engine(source), create_engine(target), _stop_after_messages, batch_rows=20)


@pytest.mark.parametrize(
    "state",
    [
        pytest.param(state, marks=[pytest.mark.serial] if state in KILLED_FOR_REAL else [])
        for state in HAND_EMPTIED
    ],
)
def test_every_refusal_names_a_command_that_finishes_a_copy_into_postgresql(
    pg_url: str, source: Path, state: str
) -> None:
    interrupt_copy(source, pg_url, kill=state in KILLED_FOR_REAL)
    HAND_EMPTIED[state](pg_url)
    follow_the_advice(str(source), pg_url)
    assert_same_store(create_engine(source), create_engine(pg_url))
    assert not has_table(pg_url, "hermes_copy_state")
    with SessionDB(url=pg_url) as db:
        db.append_message("s00000", "user", "after the copy")


def test_opening_a_target_whose_copy_has_not_finished_names_the_command_that_finishes_it(
    pg_url: str, source: Path
) -> None:
    """Before, the target opened, listed part of the source, and the first append failed
    on ``pk_messages`` (the id sequence is moved only at the copy's end)."""
    interrupt_copy(source, pg_url, kill=False)
    shown = sa.make_url(pg_url).render_as_string(hide_password=True)
    for read_only in (False, True):
        with pytest.raises(CopyUnfinished) as refused:
            SessionDB(url=pg_url, read_only=read_only)
        message = str(refused.value)
        assert "\n" not in message
        assert f"hermes-store copy sqlite:///{source} {shown} --resume" in message
    result = CliRunner().invoke(cli, ["--url", pg_url, "sessions"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and "--resume" in result.output
    copy_store(create_engine(source), create_engine(pg_url), resume=True, batch_rows=20)
    with SessionDB(url=pg_url) as db:
        db.append_message("s00000", "user", "after the copy")


SQLITE_HAND_EMPTIED: dict[str, Callable[[Path], None]] = {
    "killed": lambda path: None,
    "rows deleted": lambda path: run_sql(
        f"sqlite:///{path}", "DELETE FROM messages", "DELETE FROM sessions", "DELETE FROM state_meta"
    ),
    "bookkeeping dropped": lambda path: run_sql(f"sqlite:///{path}", "DROP TABLE hermes_copy_state"),
    "sessions and messages tables dropped": lambda path: run_sql(
        f"sqlite:///{path}", "DROP TABLE messages", "DROP TABLE sessions"
    ),
    "file removed": lambda path: [
        Path(f"{path}{end}").unlink(missing_ok=True) for end in ("", "-wal", "-shm")
    ],
}


@pytest.mark.parametrize(
    "state",
    [
        pytest.param(state, marks=[pytest.mark.serial] if state == "killed" else [])
        for state in SQLITE_HAND_EMPTIED
    ],
)
def test_every_refusal_names_a_command_that_finishes_a_copy_into_sqlite(
    pg_url: str, source: Path, tmp_path: Path, state: str
) -> None:
    fill_head_extras(source)
    copy_store(create_engine(source), create_engine(pg_url), batch_rows=200)
    back = tmp_path / "back.db"
    interrupt_copy(pg_url, f"sqlite:///{back}", kill=state == "killed")
    with pytest.raises(CopyUnfinished, match="--resume"):
        SessionDB(back)
    SQLITE_HAND_EMPTIED[state](back)
    if state == "bookkeeping dropped":
        # Without its record a half-copied file is a store like any other: never emptied.
        result = CliRunner().invoke(cli, ["copy", pg_url, str(back)])
        assert result.exit_code == 1
        assert result.output.strip().endswith("copy only into an empty store: name a new file as the target")
        back = tmp_path / "new.db"
    follow_the_advice(pg_url, str(back))
    assert_same_store(create_engine(source), create_engine(back))
    assert not has_table(f"sqlite:///{back}", "hermes_copy_state")
