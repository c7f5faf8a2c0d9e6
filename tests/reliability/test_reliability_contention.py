"""Contention: many processes on one ``state.db``.

One run of the scenario (module fixture): 8 writer processes append messages (with and
without tool calls) and token updates — to their own session and to 4 sessions they all
share — for a fixed number of operations (100 each: every writer is still writing while
all the others are, and replaces, retries and a long-held snapshot all occur), while 2
reader processes search (word and trigram indexes), list and export, and a third process
holds one ORM read transaction from before the first write until after the last. The
tests below then each check one guarantee of that run. Figures (throughput, p50/p99
latency, retries) go to the "reliability figures" summary.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from _harness import ContentionResult, reaped, run_contention, spawn, wait_for

from hermes_store.api.session_db import SessionDB

# serial: they aim SIGKILLs and contention at measured timings, which parallel tests skew.
pytestmark = [pytest.mark.slow, pytest.mark.serial]

WRITERS = 8
READERS = 2
OPS_PER_WRITER = 100
OPENERS = 4


@pytest.fixture(scope="module")
def contention(
    tmp_path_factory: pytest.TempPathFactory, reliability_figures: dict[str, Any]
) -> ContentionResult:
    result = run_contention(
        tmp_path_factory.mktemp("contention"),
        writers=WRITERS,
        readers=READERS,
        ops_per_writer=OPS_PER_WRITER,
    )
    figures = result.figures()
    figures["writer_errors"] = len(result.writer_errors)
    figures["reader_errors"] = len(result.reader_errors)
    reliability_figures["contention"] = figures
    return result


def test_every_operation_ran(contention: ContentionResult) -> None:
    assert contention.operations == WRITERS * OPS_PER_WRITER
    assert contention.appends + contention.token_updates + contention.replaces == contention.operations
    assert contention.replaces > 0


def test_no_writer_sees_an_exception(contention: ContentionResult) -> None:
    assert contention.writer_errors == []


def test_every_acknowledged_message_is_stored_once_and_indexes_agree(contention: ContentionResult) -> None:
    # verify_store: integrity_check, FTS5 integrity-check on both indexes (one entry per
    # message, with the trigger's text), counters equal rows, no tag twice, nothing torn,
    # every acknowledged message at its id, token updates counted exactly.
    assert contention.verification_error is None
    assert contention.verified["acknowledged"] == contention.appends
    assert contention.verified["unacknowledged_present"] == 0


def test_readers_see_no_errors(contention: ContentionResult) -> None:
    assert contention.reader_operations > 0
    assert contention.reader_errors == []


def test_long_read_transaction_keeps_its_snapshot(contention: ContentionResult) -> None:
    assert contention.long_reader_stable
    assert contention.long_reader_seconds > 0


def test_exports_show_one_consistent_state(contention: ContentionResult) -> None:
    """An export is one snapshot: its ``message_count`` equals its list of messages.

    ``export_session`` must not read the session row and its messages in two separate
    transactions, between which another process can append.
    """
    assert contention.torn_reads == 0, contention.torn_examples


def test_latency_stays_within_the_retry_budget(contention: ContentionResult) -> None:
    # 15 attempts × (1 s busy wait + ≤150 ms pause) is the most one write may take.
    assert contention.max_ms < 15 * 1150
    assert contention.p50_ms <= contention.p99_ms <= contention.max_ms


def test_concurrent_first_opens_of_a_new_file_all_succeed(tmp_path: Path) -> None:
    """4 processes open the same not-yet-existing database at the same moment (twice).

    Whoever comes first creates the schema inside ``BEGIN IMMEDIATE``; the others must
    wait for it (retrying like any other write) and then find it done — not fail with
    "database is locked".
    """
    failures: list[str] = []
    for round_ in range(2):
        db = tmp_path / f"round{round_}" / "state.db"
        db.parent.mkdir()
        start = tmp_path / f"start{round_}"
        ready = [tmp_path / f"ready{round_}-{n}" for n in range(OPENERS)]
        processes = [
            spawn(
                "first_open",
                {"db": str(db), "start": str(start), "ready": str(ready[n]), "n": n},
                stdout=subprocess.PIPE,
            )
            for n in range(OPENERS)
        ]
        with reaped(processes):
            wait_for(lambda ready=ready: all(p.exists() for p in ready), 120, "openers to start")
            start.touch()
            outcomes = [json.loads(p.communicate(timeout=120)[0]) for p in processes]
        failures += [f"round {round_}: {o['error']}" for o in outcomes if not o["ok"]]
    assert failures == []


@pytest.mark.parametrize("export", ["export_session", "export_all"])
def test_export_is_one_snapshot_when_a_write_lands_in_between(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, export: str
) -> None:
    """The race above, made certain: another process appends right after the export has
    read the session list or row. An export that is one snapshot cannot see it half."""
    db = tmp_path / "state.db"
    with SessionDB(db) as store, SessionDB(db) as other:
        store.create_session("s", "cli")
        store.append_message("s", "user", "first")
        fired: list[bool] = []

        def concurrent_append_after(name: str) -> None:
            original = getattr(SessionDB, name)

            def wrapper(self: SessionDB, *args: Any, **kwargs: Any) -> Any:
                result = original(self, *args, **kwargs)
                if self is store and not fired:
                    fired.append(True)
                    other.append_message("s", "user", "lands in between")
                return result

            monkeypatch.setattr(SessionDB, name, wrapper)

        for name in ("get_session", "search_sessions", "list_sessions_rich"):
            concurrent_append_after(name)
        exported = store.export_session("s") if export == "export_session" else store.export_all()[0]
    assert exported is not None
    assert exported["message_count"] == len(exported["messages"]), exported
