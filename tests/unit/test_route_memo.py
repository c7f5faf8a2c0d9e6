"""The way a write's statements go is decided again whenever a SQLAlchemy listener comes
or goes (route_choice.RouteMemo), not at every write."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, event

from hermes_store import SessionDB
from hermes_store.db import route_choice, sqlalchemy_private


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionDB]:
    db = SessionDB(tmp_path / "state.db")
    db.create_session("s", "cli")
    db.append_message("s", "user", "first")  # the write connection's way is decided
    try:
        yield db
    finally:
        db.close()


def _harmless(*_args: Any) -> None:
    """A listener of an event that watches no statement (the way stays the bare cursor)."""


def test_a_listener_swapped_for_another_kind_is_seen_at_the_next_write(store: SessionDB) -> None:
    """One listener removed and another added between two writes: as many listeners as
    before, but the newest is another, so the next write decides afresh."""
    cursor_seen: list[str] = []
    core_seen: list[Any] = []

    def on_cursor(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        cursor_seen.append(statement)

    def on_core(_conn: Any, clause: Any, *_rest: Any) -> None:
        core_seen.append(clause)

    event.listen(store.engine, "before_cursor_execute", on_cursor)
    store.append_message("s", "user", "seen by the cursor listener")
    assert [s.split()[0] for s in cursor_seen] == ["BEGIN", "INSERT", "UPDATE", "COMMIT"]

    event.remove(store.engine, "before_cursor_execute", on_cursor)
    event.listen(store.engine, "before_execute", on_core)
    store.append_message("s", "user", "seen by the execute listener")
    # before_execute fires only on Connection.execute: the write took SQLAlchemy's Core way.
    assert [str(clause).split()[0] for clause in core_seen] == ["BEGIN", "INSERT", "UPDATE", "COMMIT"]
    assert len(cursor_seen) == 4
    event.remove(store.engine, "before_execute", on_core)


def test_the_change_the_fingerprint_misses_is_seen_within_the_full_check_interval(store: SessionDB) -> None:
    """The newest listener removed and added again after swapping another: the registry's
    size and newest entry are what they were, so the memo keeps the bare cursor for a
    while, and decides afresh within FULL_CHECK_EVERY writes."""
    event.listen(store.engine, "engine_connect", _harmless)
    event.listen(store.engine, "engine_disposed", _harmless)  # now the newest listener
    store.append_message("s", "user", "decided with both harmless listeners")
    before = sqlalchemy_private.listeners_fingerprint()

    seen: list[str] = []
    event.remove(store.engine, "engine_connect", _harmless)
    event.remove(store.engine, "engine_disposed", _harmless)
    event.listen(store.engine, "before_cursor_execute", lambda *args: seen.append(args[2]))
    event.listen(store.engine, "engine_disposed", _harmless)
    assert sqlalchemy_private.listeners_fingerprint() == before

    writes = 0
    while not any(statement.startswith("INSERT INTO messages") for statement in seen):
        store.append_message("s", "user", f"write {writes}")
        writes += 1
        assert writes <= route_choice.FULL_CHECK_EVERY


def test_any_listener_added_changes_the_fingerprint() -> None:
    """Adding a listener changes the fingerprint and removing it restores it. The registry
    is the process's: engines of earlier tests that other threads let go meanwhile take
    their listeners out of it too, so the garbage collector is kept still and a round
    that such a release disturbed is measured again."""
    engine = create_engine("sqlite://")
    gc.collect()
    gc.disable()
    try:
        for _ in range(5):
            before = sqlalchemy_private.listeners_fingerprint()
            assert before is not None  # this SQLAlchemy was checked: the memo is in use
            event.listen(engine, "before_cursor_execute", _harmless)
            during = sqlalchemy_private.listeners_fingerprint()
            event.remove(engine, "before_cursor_execute", _harmless)
            after = sqlalchemy_private.listeners_fingerprint()
            assert during != before
            if after == before:
                break
        assert after == before
    finally:
        gc.enable()
        engine.dispose()
