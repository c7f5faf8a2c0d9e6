"""The database server restarted while four processes append: nothing acknowledged is lost.

The shared server on 5432 is never touched: this module starts a private cluster of its
own with pytest-postgresql's executor (``initdb``/``pg_ctl`` from the PostgreSQL 15
binaries, another port, its Unix socket in a temporary folder), and restarts that one
with a fast shutdown while the writers run. When the tests run as root (PostgreSQL
refuses to), ``pg_ctl`` runs as the ``postgres`` account through ``setpriv`` in a
folder that account owns.

Every writer logs each acknowledged message id, and each failure's exception class, to
its own file. Afterwards: every acknowledged id is in the database with its content,
every failure was one ``StoreError``, writers carried on after the restart without
being restarted themselves, and each session's counters equal its rows.
"""

from __future__ import annotations

import multiprocessing
import os
import pwd
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PG_BIN = Path(os.environ.get("HERMES_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
SERVICE_ACCOUNT = "postgres"
WRITERS = 4
PER_WRITER = 60
# Durable enough for a clean fast shutdown (it checkpoints), quick on a shared machine.
SERVER_SETTINGS = "-c fsync=off -c full_page_writes=off -c max_connections=40"


def _pg_ctl(base: Path) -> str:
    pg_ctl = PG_BIN / "pg_ctl"
    if os.geteuid() != 0:
        return str(pg_ctl)
    try:
        pwd.getpwnam(SERVICE_ACCOUNT)
    except KeyError:
        pytest.skip(f"running as root and there is no {SERVICE_ACCOUNT!r} account to run PostgreSQL as")
    shutil.chown(base, SERVICE_ACCOUNT, SERVICE_ACCOUNT)
    wrapper = base / "pg_ctl"
    wrapper.write_text(
        f"#!/bin/sh\nexec setpriv --reuid={SERVICE_ACCOUNT} --regid={SERVICE_ACCOUNT} "
        f'--init-groups "{pg_ctl}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


@pytest.fixture(scope="module")
def private_server() -> Iterator[Any]:
    """A throwaway PostgreSQL cluster, started for this module and deleted after it."""
    if not (PG_BIN / "pg_ctl").exists():
        if os.environ.get("HERMES_TEST_REQUIRE_PG"):
            pytest.fail(f"no PostgreSQL binaries in {PG_BIN}")
        pytest.skip(f"no PostgreSQL binaries in {PG_BIN}")
    from port_for import select_random
    from pytest_postgresql.executors import PostgreSQLExecutor

    base = Path(tempfile.mkdtemp(prefix="hermes-restart-"))
    base.chmod(0o755)
    executor = PostgreSQLExecutor(
        executable=_pg_ctl(base),
        host="127.0.0.1",
        port=select_random(),
        datadir=str(base / "data"),
        unixsocketdir=str(base),
        logfile=str(base / "server.log"),
        startparams="-w",
        dbname="hermes_restart",
        postgres_options=SERVER_SETTINGS,
    )
    executor.start()
    _wait_until_accepting(executor)
    try:
        yield executor
    finally:
        executor.stop()
        shutil.rmtree(base, ignore_errors=True)


def _wait_until_accepting(executor: Any) -> None:
    """``pg_ctl start -w`` can return while a loaded server still says "starting up"."""
    import psycopg

    deadline = time.monotonic() + 60
    while True:
        try:
            psycopg.connect(host="127.0.0.1", port=executor.port, user="postgres", dbname="postgres").close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _url(executor: Any) -> str:
    return f"postgresql+psycopg://postgres@127.0.0.1:{executor.port}/postgres"


def _writer(url: str, index: int, log_dir: str) -> None:
    from hermes_store import SessionDB, StoreError

    db = SessionDB(url=url)
    acked = Path(log_dir, f"acked-{index}")
    failed = Path(log_dir, f"failed-{index}")
    for i in range(PER_WRITER):
        try:
            message_id = db.append_message(f"s{index}", "user", f"w{index}-{i}", tool_calls=[{"id": "t"}])
        except StoreError as exc:
            with failed.open("a") as out:
                out.write(f"{type(exc).__name__}\n")
        except Exception as exc:  # anything else is a defect the test reports
            with failed.open("a") as out:
                out.write(f"UNEXPECTED {type(exc).__module__}.{type(exc).__name__}: {exc}\n")
        else:
            with acked.open("a") as out:
                out.write(f"{message_id} w{index}-{i}\n")
        time.sleep(0.02)
    db.close()


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_server_restart_under_four_appending_processes_loses_nothing_acknowledged(
    private_server: Any, tmp_path: Path
) -> None:
    from hermes_store import SessionDB

    url = _url(private_server)
    db = SessionDB(url=url)
    for index in range(WRITERS):
        db.create_session(f"s{index}", "cli")
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_writer, args=(url, n, str(tmp_path))) for n in range(WRITERS)]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + 60
    # Every writer has opened its store and written (a slow one still opening would meet
    # the stop inside its open, which this test is not about), and 4 each on average.
    while (
        min(len(_lines(tmp_path / f"acked-{n}")) for n in range(WRITERS)) < 1
        or sum(len(_lines(tmp_path / f"acked-{n}")) for n in range(WRITERS)) < 4 * WRITERS
    ):
        assert time.monotonic() < deadline, "writers made no progress"
        time.sleep(0.05)
    before_restart = {n: len(_lines(tmp_path / f"acked-{n}")) for n in range(WRITERS)}
    private_server.stop()  # pg_ctl stop -m fast: every backend is terminated
    time.sleep(0.5)  # writers meet a server that is down, not just restarting
    private_server.start()
    _wait_until_accepting(private_server)
    for worker in workers:
        worker.join(120)
    assert [worker.exitcode for worker in workers] == [0] * WRITERS

    failures = [line for n in range(WRITERS) for line in _lines(tmp_path / f"failed-{n}")]
    assert not [line for line in failures if line.startswith("UNEXPECTED")], failures
    assert set(failures) <= {"ServerUnavailable"}
    stored = {m["id"]: m["content"] for n in range(WRITERS) for m in db.get_messages(f"s{n}")}
    for n in range(WRITERS):
        acked = [line.split() for line in _lines(tmp_path / f"acked-{n}")]
        assert len(acked) > before_restart[n], f"writer {n} did not recover after the restart"
        for message_id, content in acked:
            assert stored.get(int(message_id)) == content
        row = db.get_session(f"s{n}")
        assert row is not None
        assert row["message_count"] == row["tool_call_count"] == db.message_count(f"s{n}")
    assert len(stored) >= WRITERS * PER_WRITER - len(failures)
    # shown with -s; docs/reliability.md quotes it
    print(f"restart: {len(stored)} stored, {len(failures)} ServerUnavailable, acked before {before_restart}")
    db.close()


def test_a_read_while_the_server_is_down_is_the_stores_one_line_error(private_server: Any) -> None:
    """A read that must connect while the server is stopped gets ``ServerUnavailable``, not
    the driver's error (the write path's retries and the settling of a lost COMMIT rely on it)."""
    from hermes_store import SessionDB
    from hermes_store.errors import ServerUnavailable

    db = SessionDB(url=_url(private_server))
    try:
        db.create_session("r", "cli")
        db.engine.dispose()  # no pooled connection: the read must connect
        private_server.stop()
        try:
            with pytest.raises(ServerUnavailable) as caught:
                db.message_count("r")
            assert "\n" not in str(caught.value)
        finally:
            private_server.start()
        assert db.message_count("r") == 0
    finally:
        db.close()
