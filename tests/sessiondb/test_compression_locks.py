"""Compression leases and compression-failure cooldowns, on both backends and both APIs.

The lease is what keeps two agents sharing one session from compressing it together, so
besides the single-caller rules it is raced for by threads and by separate processes:
exactly one must win.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_store import SessionDB


@pytest.fixture
def store(db: SessionDB, raw: Any) -> SessionDB:
    """The ``db`` store with no leases (the shared PostgreSQL store keeps rows of this
    table between tests, as its emptier clears sessions and messages only)."""
    raw.execute("DELETE FROM compression_locks")
    return db


def lease_row(raw: Any, session_id: str) -> tuple[Any, ...] | None:
    rows = raw.rows(
        "SELECT holder, acquired_at, expires_at FROM compression_locks WHERE session_id = ?", (session_id,)
    )
    return rows[0] if rows else None


# --- acquiring -------------------------------------------------------------------------


def test_first_caller_gets_the_lease(store: SessionDB, raw: Any) -> None:
    before = time.time()
    assert store.try_acquire_compression_lock("s1", "agent-a") is True
    assert store.get_compression_lock_holder("s1") == "agent-a"
    holder, acquired_at, expires_at = lease_row(raw, "s1") or (None, 0.0, 0.0)
    assert holder == "agent-a"
    assert before <= acquired_at <= time.time()
    assert expires_at == pytest.approx(acquired_at + 300.0)


def test_a_second_holder_is_refused_while_the_lease_runs(store: SessionDB) -> None:
    assert store.try_acquire_compression_lock("s1", "agent-a") is True
    assert store.try_acquire_compression_lock("s1", "agent-b") is False
    assert store.get_compression_lock_holder("s1") == "agent-a"


def test_the_holder_may_ask_again_without_extending_the_lease(store: SessionDB, raw: Any) -> None:
    assert store.try_acquire_compression_lock("s1", "agent-a", ttl_seconds=60) is True
    first = lease_row(raw, "s1")
    assert store.try_acquire_compression_lock("s1", "agent-a", ttl_seconds=600) is True
    assert lease_row(raw, "s1") == first


def test_leases_are_per_session(store: SessionDB) -> None:
    assert store.try_acquire_compression_lock("s1", "agent-a") is True
    assert store.try_acquire_compression_lock("s2", "agent-b") is True
    assert store.get_compression_lock_holder("s1") == "agent-a"
    assert store.get_compression_lock_holder("s2") == "agent-b"


def test_the_session_need_not_exist(store: SessionDB) -> None:
    # The lease table has no foreign key: an agent locks the id it is about to rotate.
    assert store.get_session("nowhere") is None
    assert store.try_acquire_compression_lock("nowhere", "agent-a") is True


def test_an_expired_lease_is_taken_over(store: SessionDB, raw: Any) -> None:
    assert store.try_acquire_compression_lock("s1", "crashed") is True
    raw.execute("UPDATE compression_locks SET expires_at = ? WHERE session_id = ?", (time.time() - 1, "s1"))
    assert store.get_compression_lock_holder("s1") is None
    assert store.try_acquire_compression_lock("s1", "fresh") is True
    assert store.get_compression_lock_holder("s1") == "fresh"
    assert len(raw.rows("SELECT holder FROM compression_locks WHERE session_id = ?", ("s1",))) == 1


@pytest.mark.parametrize("ttl", [0, -5.0])
def test_a_lease_without_time_left_can_be_taken_by_anyone(store: SessionDB, ttl: float) -> None:
    assert store.try_acquire_compression_lock("s1", "agent-a", ttl_seconds=ttl) is True
    time.sleep(0.002)
    assert store.try_acquire_compression_lock("s1", "agent-b") is True
    assert store.get_compression_lock_holder("s1") == "agent-b"


def test_an_empty_session_id_gets_no_lease(store: SessionDB, raw: Any) -> None:
    assert store.try_acquire_compression_lock("", "agent-a") is False
    assert store.try_acquire_compression_lock(None, "agent-a") is False  # type: ignore[arg-type]
    assert store.get_compression_lock_holder("") is None
    assert raw.rows("SELECT session_id FROM compression_locks") == []


def test_wrongly_typed_arguments_raise(store: SessionDB) -> None:
    with pytest.raises(TypeError, match="holder"):
        store.try_acquire_compression_lock("s1", None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ttl_seconds"):
        store.try_acquire_compression_lock("s1", "agent-a", ttl_seconds="60")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="session_id"):
        store.try_acquire_compression_lock(7, "agent-a")  # type: ignore[arg-type]


NOT_FINITE = [float("nan"), float("inf"), float("-inf")]


@pytest.mark.parametrize("ttl", NOT_FINITE, ids=str)
def test_a_ttl_that_is_not_a_finite_number_raises_and_takes_nothing(
    store: SessionDB, raw: Any, ttl: float
) -> None:
    with pytest.raises(ValueError, match="ttl_seconds must be a finite number of seconds"):
        store.try_acquire_compression_lock("s1", "agent-a", ttl_seconds=ttl)
    assert raw.rows("SELECT session_id FROM compression_locks") == []
    assert store.try_acquire_compression_lock("s1", "agent-a", ttl_seconds=60) is True
    with pytest.raises(ValueError, match="ttl_seconds must be a finite number of seconds"):
        store.refresh_compression_lock("s1", "agent-a", ttl_seconds=ttl)
    _holder, _acquired, expires_at = lease_row(raw, "s1") or (None, None, None)
    assert math.isfinite(expires_at)
    assert store.try_acquire_compression_lock("s1", "agent-b") is False  # the lease still runs


# --- refreshing and releasing ------------------------------------------------------------


def test_refresh_moves_the_expiry_of_the_holders_lease(store: SessionDB, raw: Any) -> None:
    assert store.try_acquire_compression_lock("s1", "agent-a", ttl_seconds=5) is True
    assert store.refresh_compression_lock("s1", "agent-a", ttl_seconds=900) is True
    holder, _, expires_at = lease_row(raw, "s1") or (None, 0.0, 0.0)
    assert holder == "agent-a"
    assert expires_at == pytest.approx(time.time() + 900, abs=30)


def test_refresh_by_another_holder_changes_nothing(store: SessionDB, raw: Any) -> None:
    assert store.try_acquire_compression_lock("s1", "agent-a", ttl_seconds=5) is True
    before = lease_row(raw, "s1")
    assert store.refresh_compression_lock("s1", "agent-b", ttl_seconds=900) is False
    assert lease_row(raw, "s1") == before


def test_an_expired_lease_cannot_be_refreshed(store: SessionDB, raw: Any) -> None:
    assert store.try_acquire_compression_lock("s1", "agent-a") is True
    raw.execute("UPDATE compression_locks SET expires_at = ? WHERE session_id = ?", (time.time() - 1, "s1"))
    assert store.refresh_compression_lock("s1", "agent-a") is False
    assert store.get_compression_lock_holder("s1") is None


def test_refresh_without_a_lease_or_arguments_is_false(store: SessionDB) -> None:
    assert store.refresh_compression_lock("s1", "agent-a") is False
    assert store.refresh_compression_lock("", "agent-a") is False
    assert store.refresh_compression_lock("s1", "") is False


def test_release_lets_another_holder_in(store: SessionDB) -> None:
    assert store.try_acquire_compression_lock("s1", "agent-a") is True
    assert store.release_compression_lock("s1", "agent-a") is None
    assert store.get_compression_lock_holder("s1") is None
    assert store.try_acquire_compression_lock("s1", "agent-b") is True


def test_release_never_removes_someone_elses_lease(store: SessionDB) -> None:
    assert store.try_acquire_compression_lock("s1", "agent-a") is True
    store.release_compression_lock("s1", "agent-b")
    assert store.get_compression_lock_holder("s1") == "agent-a"


def test_release_is_idempotent(store: SessionDB) -> None:
    store.release_compression_lock("never-locked", "agent-a")
    store.release_compression_lock("", "agent-a")
    assert store.try_acquire_compression_lock("s1", "agent-a") is True
    store.release_compression_lock("s1", "agent-a")
    store.release_compression_lock("s1", "agent-a")
    assert store.get_compression_lock_holder("s1") is None


# --- database failures ---------------------------------------------------------------------


def test_a_database_failure_in_a_lease_write_is_a_warning(
    store: SessionDB, raw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # The lease table gone stands for a database that fails the statement.
    raw.execute("ALTER TABLE compression_locks RENAME TO compression_locks_away")
    try:
        with caplog.at_level(logging.WARNING, logger="hermes_store.api.features.compression_locks"):
            assert store.try_acquire_compression_lock("s1", "agent-a") is False
            assert store.refresh_compression_lock("s1", "agent-a") is False
            assert store.release_compression_lock("s1", "agent-a") is None
        assert len([r for r in caplog.records if "compression lock of session s1" in r.getMessage()]) == 3
    finally:
        raw.execute("ALTER TABLE compression_locks_away RENAME TO compression_locks")


def test_a_closed_store_raises_rather_than_answering_false(tmp_path: Path) -> None:
    closed = SessionDB(tmp_path / "state.db")
    closed.close()
    with pytest.raises(RuntimeError, match="closed"):
        closed.try_acquire_compression_lock("s1", "agent-a")


# --- races ----------------------------------------------------------------------------------


def test_threads_racing_for_one_lease_have_exactly_one_winner(store: SessionDB) -> None:
    contenders = 8
    start = threading.Barrier(contenders)
    results: list[bool] = []
    guard = threading.Lock()

    def contend(holder: str) -> None:
        start.wait()
        won = store.try_acquire_compression_lock("contended", holder)
        with guard:
            results.append(won)

    threads = [threading.Thread(target=contend, args=(f"thread-{n}",)) for n in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results) == [False] * (contenders - 1) + [True]
    assert (store.get_compression_lock_holder("contended") or "").startswith("thread-")


def test_threads_racing_for_an_expired_lease_have_exactly_one_winner(store: SessionDB, raw: Any) -> None:
    assert store.try_acquire_compression_lock("contended", "crashed") is True
    raw.execute(
        "UPDATE compression_locks SET expires_at = ? WHERE session_id = ?", (time.time() - 1, "contended")
    )
    contenders = 6
    start = threading.Barrier(contenders)
    results: list[bool] = []
    guard = threading.Lock()

    def contend(holder: str) -> None:
        start.wait()
        won = store.try_acquire_compression_lock("contended", holder)
        with guard:
            results.append(won)

    threads = [threading.Thread(target=contend, args=(f"thread-{n}",)) for n in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results) == [False] * (contenders - 1) + [True]
    assert (store.get_compression_lock_holder("contended") or "").startswith("thread-")


def _acquire_in_child(url: str, holder: str, start: Any, answers: Any) -> None:
    store = SessionDB(url=url)
    try:
        start.wait(60)
        answers.put((holder, store.try_acquire_compression_lock("contended", holder)))
    finally:
        store.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def race_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL that separate processes open: a SQLite file, or a new PostgreSQL
    database at head."""
    if request.param == "sqlite":
        path = tmp_path / "state.db"
        SessionDB(path).close()
        yield f"sqlite:///{path}"
    else:
        yield request.getfixturevalue("pg_head_url")


def test_processes_racing_for_one_lease_have_exactly_one_winner(race_url: str) -> None:
    contenders = 4
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(contenders)
    answers = context.Queue()
    workers = [
        context.Process(target=_acquire_in_child, args=(race_url, f"process-{n}", start, answers))
        for n in range(contenders)
    ]
    for worker in workers:
        worker.start()
    outcomes = dict(answers.get(timeout=120) for _ in range(contenders))
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    winners = [holder for holder, won in outcomes.items() if won]
    assert len(winners) == 1
    store = SessionDB(url=race_url)
    try:
        assert store.get_compression_lock_holder("contended") == winners[0]
    finally:
        store.close()


# --- cooldowns ------------------------------------------------------------------------------


def test_a_recorded_cooldown_reads_back_with_the_time_left(store: SessionDB) -> None:
    store.create_session("s1", "cli")
    until = time.time() + 120
    store.record_compression_failure_cooldown("s1", until, "context too large")
    cooldown = store.get_compression_failure_cooldown("s1")
    assert cooldown is not None
    assert cooldown["cooldown_until"] == pytest.approx(until)
    assert 100 < cooldown["remaining_seconds"] <= 120
    assert cooldown["error"] == "context too large"
    assert set(cooldown) == {"cooldown_until", "remaining_seconds", "error"}
    session = store.get_session("s1") or {}
    assert session["compression_failure_cooldown_until"] == pytest.approx(until)
    assert session["compression_failure_error"] == "context too large"


def test_a_cooldown_without_error_reads_back_with_none(store: SessionDB) -> None:
    store.create_session("s1", "cli")
    store.record_compression_failure_cooldown("s1", time.time() + 60)
    cooldown = store.get_compression_failure_cooldown("s1") or {}
    assert cooldown["error"] is None


def test_a_past_cooldown_is_stored_but_reads_as_none(store: SessionDB) -> None:
    store.create_session("s1", "cli")
    until = time.time() - 10
    store.record_compression_failure_cooldown("s1", until, "old failure")
    assert store.get_compression_failure_cooldown("s1") is None
    session = store.get_session("s1") or {}
    assert session["compression_failure_cooldown_until"] == pytest.approx(until)
    assert session["compression_failure_error"] == "old failure"


def test_a_later_record_replaces_the_cooldown(store: SessionDB) -> None:
    store.create_session("s1", "cli")
    store.record_compression_failure_cooldown("s1", time.time() + 60, "first")
    store.record_compression_failure_cooldown("s1", time.time() + 300, None)
    cooldown = store.get_compression_failure_cooldown("s1") or {}
    assert cooldown["remaining_seconds"] > 200
    assert cooldown["error"] is None


def test_clear_removes_the_cooldown_and_its_error(store: SessionDB) -> None:
    store.create_session("s1", "cli")
    store.record_compression_failure_cooldown("s1", time.time() + 60, "boom")
    store.clear_compression_failure_cooldown("s1")
    assert store.get_compression_failure_cooldown("s1") is None
    session = store.get_session("s1") or {}
    assert session["compression_failure_cooldown_until"] is None
    assert session["compression_failure_error"] is None


def test_cooldowns_of_missing_or_empty_sessions(store: SessionDB) -> None:
    store.record_compression_failure_cooldown("nowhere", time.time() + 60, "x")
    store.clear_compression_failure_cooldown("nowhere")
    store.record_compression_failure_cooldown("", time.time() + 60)
    store.clear_compression_failure_cooldown("")
    assert store.get_compression_failure_cooldown("nowhere") is None
    assert store.get_compression_failure_cooldown("") is None
    assert store.get_session("nowhere") is None


def test_a_session_without_cooldown_reads_none(store: SessionDB) -> None:
    store.create_session("s1", "cli")
    assert store.get_compression_failure_cooldown("s1") is None


def test_cooldown_arguments_are_checked(store: SessionDB) -> None:
    store.create_session("s1", "cli")
    with pytest.raises(TypeError, match="cooldown_until"):
        store.record_compression_failure_cooldown("s1", "soon")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="error"):
        store.record_compression_failure_cooldown("s1", time.time() + 60, 42)  # type: ignore[arg-type]
    assert store.get_compression_failure_cooldown("s1") is None


def test_a_database_failure_in_a_cooldown_write_is_a_warning(
    store: SessionDB, raw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    store.create_session("s1", "cli")
    # The error column renamed away stands for a database that fails the statement.
    raw.execute("ALTER TABLE sessions RENAME COLUMN compression_failure_error TO error_away")
    try:
        with caplog.at_level(logging.WARNING, logger="hermes_store.api.features.compression_locks"):
            assert store.record_compression_failure_cooldown("s1", time.time() + 60) is None
            assert store.clear_compression_failure_cooldown("s1") is None
        assert len([r for r in caplog.records if "cooldown of session s1" in r.getMessage()]) == 2
    finally:
        raw.execute("ALTER TABLE sessions RENAME COLUMN error_away TO compression_failure_error")


@pytest.mark.parametrize("until", NOT_FINITE, ids=str)
def test_a_cooldown_that_is_not_a_finite_time_raises_and_keeps_the_old_one(
    store: SessionDB, until: float
) -> None:
    store.create_session("s1", "cli")
    store.record_compression_failure_cooldown("s1", time.time() + 60, "first")
    with pytest.raises(ValueError, match="cooldown_until must be a finite number of seconds"):
        store.record_compression_failure_cooldown("s1", until, "second")
    cooldown = store.get_compression_failure_cooldown("s1") or {}
    assert cooldown["error"] == "first"
    assert 0 < cooldown["remaining_seconds"] <= 60
