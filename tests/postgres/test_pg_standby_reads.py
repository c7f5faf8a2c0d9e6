"""Reads from a hot standby, with read-your-writes (``SessionDB(url=…, read_urls=[…])``).

A real primary and a streaming standby (``replication.primary_and_standby``, asynchronous
so that the standby can fall behind). A read right after a write sees the write, wherever
it is served; a standby that has not replayed it, lags, is down, or cancels a read for a
conflict with recovery gives way to the primary.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from replication import Node, primary_and_standby

from hermes_store import SessionDB

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Node, Node]]:
    with primary_and_standby(
        synchronous=False, standby_settings=("-c max_standby_streaming_delay=0",)
    ) as nodes:
        yield nodes


def _on(node: Node, statement: str) -> None:
    with psycopg.connect(
        host="127.0.0.1", port=node.port, user="postgres", dbname="postgres", autocommit=True
    ) as c:
        c.execute(statement)


def _store(primary: Node, standby: Node) -> SessionDB:
    return SessionDB(url=primary.url(), read_urls=[standby.url()], max_standby_lag_s=5.0)


def test_reads_after_writes_see_them_and_most_come_from_the_standby(pair: tuple[Node, Node]) -> None:
    primary, standby = pair
    db = _store(primary, standby)
    try:
        for n in range(30):
            sid = db.create_session(f"ryw{n}", "cli", system_prompt=f"prompt {n}")
            db.append_message(sid, role="user", content=f"kangaroo number {n}")
            assert (db.get_session(sid) or {})["system_prompt"] == f"prompt {n}"
            assert [m["content"] for m in db.get_messages(sid)] == [f"kangaroo number {n}"]
        for _ in range(30):
            assert len(db.search_messages("kangaroo", limit=100)) >= 30
        served = db.standby_reads_served
    finally:
        db.close()
    assert served["primary"] + sum(v for k, v in served.items() if k != "primary") == 30 * 2 + 30
    assert served[standby.url()] > 30, served


def test_a_standby_that_has_not_replayed_the_write_gives_way_to_the_primary(pair: tuple[Node, Node]) -> None:
    primary, standby = pair
    db = _store(primary, standby)
    _on(standby, "SELECT pg_wal_replay_pause()")
    try:
        sid = db.create_session("paused", "cli")
        db.append_message(sid, role="user", content="written while the standby is paused")
        before = db.standby_reads_served["primary"]
        assert [m["content"] for m in db.get_messages(sid)] == ["written while the standby is paused"]
        assert db.standby_reads_served["primary"] == before + 1
    finally:
        _on(standby, "SELECT pg_wal_replay_resume()")
        db.close()


def test_a_standby_that_is_down_is_skipped(pair: tuple[Node, Node]) -> None:
    primary, _ = pair
    db = SessionDB(url=primary.url(), read_urls=["postgresql+psycopg://postgres@127.0.0.1:1/postgres"])
    try:
        sid = db.create_session("nostandby", "cli")
        db.append_message(sid, role="user", content="hello")
        assert db.message_count(sid) == 1
        assert db.standby_reads_served["primary"] >= 1
    finally:
        db.close()


def test_a_read_cancelled_by_recovery_runs_again_on_the_primary(pair: tuple[Node, Node]) -> None:
    primary, standby = pair
    db = _store(primary, standby)
    try:
        sid = db.create_session("conflict", "cli")
        db.append_message(sid, role="user", content="x")
        time.sleep(0.5)  # replayed

        def lock_once_the_read_runs() -> None:
            # The standby's read must hold its lock on messages when the primary's lock is
            # replayed there: wait until the standby runs it, then lock on the primary.
            deadline = time.monotonic() + 30
            where = {"host": "127.0.0.1", "port": standby.port, "user": "postgres", "dbname": "postgres"}
            with psycopg.connect(**where) as c:
                while time.monotonic() < deadline:
                    running = c.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                        "AND query LIKE 'SELECT pg_sleep(1.5)%%'"
                    ).fetchone()
                    c.rollback()
                    if running and running[0]:
                        break
                    time.sleep(0.01)
            _on(primary, "BEGIN; LOCK TABLE messages IN ACCESS EXCLUSIVE MODE; COMMIT")

        locker = threading.Thread(target=lock_once_the_read_runs)

        def slow_read(connection: Any) -> int:
            if not locker.is_alive() and locker.ident is None:
                locker.start()  # its lock reaches the standby while this read holds the table
            return int(connection.exec_driver_sql("SELECT pg_sleep(1.5), count(*) FROM messages").one()[1])

        before = db.standby_reads_served
        assert db._query(slow_read) >= 1
        locker.join()
        after = db.standby_reads_served
    finally:
        db.close()
    assert after["primary"] == before["primary"] + 1
