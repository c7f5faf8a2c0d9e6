"""Cross-platform handoff: request, poll, list, claim (raced), complete and fail."""

from __future__ import annotations

import logging
import multiprocessing
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_store import SessionDB


def state(store: SessionDB, session_id: str) -> dict[str, Any] | None:
    return store.get_handoff_state(session_id)


def test_a_session_without_handoff_has_an_empty_state(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    assert state(db, "s1") == {"state": None, "platform": None, "error": None}


def test_an_unknown_session_has_no_state(db: SessionDB) -> None:
    assert state(db, "nowhere") is None


def test_request_marks_the_session_pending(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    assert db.request_handoff("s1", "telegram") is True
    assert state(db, "s1") == {"state": "pending", "platform": "telegram", "error": None}
    row = db.get_session("s1") or {}
    assert (row["handoff_state"], row["handoff_platform"], row["handoff_error"]) == (
        "pending",
        "telegram",
        None,
    )


def test_request_for_an_unknown_session_is_false(db: SessionDB) -> None:
    assert db.request_handoff("nowhere", "telegram") is False
    assert db.get_session("nowhere") is None


@pytest.mark.parametrize("in_flight", ["pending", "running"])
def test_request_is_refused_while_a_handoff_is_in_flight(db: SessionDB, in_flight: str) -> None:
    db.create_session("s1", "cli")
    assert db.request_handoff("s1", "telegram") is True
    if in_flight == "running":
        assert db.claim_handoff("s1") is True
    assert db.request_handoff("s1", "discord") is False
    assert state(db, "s1") == {"state": in_flight, "platform": "telegram", "error": None}


def test_a_new_request_after_a_failure_clears_the_error(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    db.request_handoff("s1", "telegram")
    db.claim_handoff("s1")
    db.fail_handoff("s1", "chat not found")
    assert state(db, "s1") == {"state": "failed", "platform": "telegram", "error": "chat not found"}
    assert db.request_handoff("s1", "discord") is True
    assert state(db, "s1") == {"state": "pending", "platform": "discord", "error": None}


def test_a_new_request_after_completion_is_accepted(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    db.request_handoff("s1", "telegram")
    db.complete_handoff("s1")
    assert db.request_handoff("s1", "slack") is True
    assert state(db, "s1") == {"state": "pending", "platform": "slack", "error": None}


def test_pending_handoffs_are_listed_oldest_session_first(db: SessionDB, make_session: Any) -> None:
    for session_id, started in (("late", 300.0), ("early", 100.0), ("middle", 200.0)):
        make_session(session_id, started=started)
        db.request_handoff(session_id, "telegram")
    make_session("running", started=50.0)
    db.request_handoff("running", "telegram")
    db.claim_handoff("running")
    make_session("done", started=60.0)
    db.request_handoff("done", "telegram")
    db.complete_handoff("done")
    make_session("untouched", started=70.0)
    pending = db.list_pending_handoffs()
    assert [row["id"] for row in pending] == ["early", "middle", "late"]
    assert pending[0] == db.get_session("early")


def test_no_pending_handoffs_is_an_empty_list(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    assert db.list_pending_handoffs() == []


def test_claim_moves_pending_to_running_once(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    db.request_handoff("s1", "telegram")
    assert db.claim_handoff("s1") is True
    assert db.claim_handoff("s1") is False
    assert state(db, "s1") == {"state": "running", "platform": "telegram", "error": None}
    assert db.list_pending_handoffs() == []


def test_claim_without_a_pending_handoff_is_false(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    assert db.claim_handoff("s1") is False
    assert db.claim_handoff("nowhere") is False
    assert state(db, "s1") == {"state": None, "platform": None, "error": None}


def test_complete_clears_the_error_from_any_state(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    db.request_handoff("s1", "telegram")
    db.complete_handoff("s1")  # straight from pending: there is no guard
    assert state(db, "s1") == {"state": "completed", "platform": "telegram", "error": None}
    db.fail_handoff("s1", "late failure")
    db.complete_handoff("s1")
    assert state(db, "s1") == {"state": "completed", "platform": "telegram", "error": None}


def test_fail_records_the_reason(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    db.request_handoff("s1", "telegram")
    db.claim_handoff("s1")
    db.fail_handoff("s1", "bot was blocked by the user")
    assert state(db, "s1") == {
        "state": "failed",
        "platform": "telegram",
        "error": "bot was blocked by the user",
    }


def test_fail_keeps_the_first_500_characters(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    db.fail_handoff("s1", "é" * 400 + "x" * 400)
    assert (state(db, "s1") or {})["error"] == "é" * 400 + "x" * 100


def test_fail_without_a_reason_raises_and_changes_nothing(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    db.request_handoff("s1", "telegram")
    with pytest.raises(TypeError):
        db.fail_handoff("s1", None)  # type: ignore[arg-type]
    assert state(db, "s1") == {"state": "pending", "platform": "telegram", "error": None}


def test_complete_and_fail_of_an_unknown_session_do_nothing(db: SessionDB) -> None:
    db.complete_handoff("nowhere")
    db.fail_handoff("nowhere", "x")
    assert db.get_session("nowhere") is None


def test_the_whole_flow(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    assert db.request_handoff("s1", "telegram") is True
    assert [row["id"] for row in db.list_pending_handoffs()] == ["s1"]
    assert db.claim_handoff("s1") is True
    assert db.list_pending_handoffs() == []
    db.complete_handoff("s1")
    assert state(db, "s1") == {"state": "completed", "platform": "telegram", "error": None}


def test_write_arguments_are_checked(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    with pytest.raises(TypeError, match="platform"):
        db.request_handoff("s1", None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="session_id"):
        db.claim_handoff(1)  # type: ignore[arg-type]
    assert state(db, "s1") == {"state": None, "platform": None, "error": None}


def test_reads_answer_empty_when_the_database_fails(
    db: SessionDB, raw: Any, caplog: pytest.LogCaptureFixture
) -> None:
    db.create_session("s1", "cli")
    db.request_handoff("s1", "telegram")
    # A column renamed away stands for a database that fails the statement.
    raw.execute("ALTER TABLE sessions RENAME COLUMN handoff_platform TO platform_away")
    try:
        with caplog.at_level(logging.WARNING, logger="hermes_store.api.features.handoff"):
            assert db.get_handoff_state("s1") is None
            assert db.list_pending_handoffs() == []
        assert len([r for r in caplog.records if "handoff" in r.getMessage()]) == 2
    finally:
        raw.execute("ALTER TABLE sessions RENAME COLUMN platform_away TO handoff_platform")


# --- races ------------------------------------------------------------------------------------


def test_threads_racing_to_claim_have_exactly_one_winner(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    db.request_handoff("s1", "telegram")
    claimers = 8
    start = threading.Barrier(claimers)
    results: list[bool] = []
    guard = threading.Lock()

    def claim() -> None:
        start.wait()
        won = db.claim_handoff("s1")
        with guard:
            results.append(won)

    threads = [threading.Thread(target=claim) for _ in range(claimers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results) == [False] * (claimers - 1) + [True]
    assert (state(db, "s1") or {})["state"] == "running"


def _claim_in_child(url: str, start: Any, answers: Any) -> None:
    store = SessionDB(url=url)
    try:
        start.wait(60)
        answers.put(store.claim_handoff("s1"))
    finally:
        store.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def race_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store with one pending handoff (session ``s1``) that separate processes open."""
    if request.param == "sqlite":
        path = tmp_path / "state.db"
        SessionDB(path).close()
        url = f"sqlite:///{path}"
    else:
        url = request.getfixturevalue("pg_head_url")
    store = SessionDB(url=url)
    try:
        store.create_session("s1", "cli")
        assert store.request_handoff("s1", "telegram") is True
    finally:
        store.close()
    yield url


def test_processes_racing_to_claim_have_exactly_one_winner(race_url: str) -> None:
    claimers = 4
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(claimers)
    answers = context.Queue()
    workers = [
        context.Process(target=_claim_in_child, args=(race_url, start, answers)) for _ in range(claimers)
    ]
    for worker in workers:
        worker.start()
    results = sorted(answers.get(timeout=120) for _ in range(claimers))
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    assert results == [False] * (claimers - 1) + [True]
