"""First deploys on PostgreSQL: many replicas opening one empty database at once all open it.

An empty database is built in one transaction under the migrators' lock, so a replica
opening it meanwhile sees it empty (and waits for the lock) or at head, never part-way;
a waiter holds no transaction open, so it never stalls a concurrent index build; and a
build killed part-way leaves the database empty for the next opener. Replicas are real
processes: each imports the store, reports ready, then opens on the test's word, so the
openings race on the database, not on Python's start-up.

The schema they build must equal one the online path built (revision 0001 first, then
every later revision step by step, as a deploy upgrades a database that has a schema),
compared catalog to catalog.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pg_server
import pytest
import sqlalchemy as sa
from pg_catalog import MIGRATOR, catalog, engine_for, scalar, wait_for
from support import REPO_ROOT, migrate_to, subprocess_env

from hermes_store import SchemaBehind, SessionDB, current_revision
from hermes_store.aio import AsyncSessionDB
from hermes_store.db.backends.postgresql import MIGRATION_LOCK_KEY
from hermes_store.schema import migrate
from hermes_store.schema.revisions import history

pytestmark = pytest.mark.postgres

HEAD = history().head
REPLICAS = 8
DEADLINE_S = 60.0
"""Generous bound on every replica of one test having opened (seconds under load)."""

REPLICA = textwrap.dedent(
    """
    import sys, warnings
    from hermes_store import SchemaBehindWarning, SessionDB
    warnings.simplefilter("error", SchemaBehindWarning)  # a partial schema would be a failure
    print("ready", flush=True)
    sys.stdin.readline()
    SessionDB(url=sys.argv[1]).close()
    print("opened", flush=True)
    """
)


@pytest.fixture(scope="module")
def online_catalog(pg_admin_url: str) -> dict[str, Any]:
    """The catalog of a database whose revisions after 0001 ran online, one by one."""
    with pg_server.scratch_database(pg_admin_url, "hermes_first_ref") as url:
        migrate_to(url, "0001")  # an empty database: one transaction
        migrate_to(url, "head")  # a schema already there: the online path
        return catalog(url)


class Replica:
    """One replica process, imported and waiting for the word to open."""

    def __init__(self, url: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", REPLICA, url],
            cwd=REPO_ROOT,
            env=subprocess_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def wait_ready(self) -> None:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        assert line == "ready", self._failure()

    def open(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def outcome(self, deadline: float) -> tuple[int, str]:
        """Exit code and stderr, waiting at most until ``deadline`` (monotonic)."""
        try:
            out, err = self.process.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
            return -1, f"still opening at the deadline\n{err}"
        if "opened" not in out:
            return self.process.returncode or -1, f"never opened\n{err}"
        return self.process.returncode, err

    def _failure(self) -> str:
        self.process.kill()
        return self.process.communicate()[1]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


@pytest.fixture
def replicas(pg_url: str) -> Iterator[list[Replica]]:
    started = [Replica(pg_url) for _ in range(REPLICAS)]
    try:
        for replica in started:
            replica.wait_ready()
        yield started
    finally:
        for replica in started:
            replica.kill()


def _all_open(replicas: list[Replica], gap_s: float) -> None:
    for replica in replicas:
        replica.open()
        if gap_s:
            time.sleep(gap_s)
    deadline = time.monotonic() + DEADLINE_S
    failures = [
        f"replica {number} exited {code}: {err[-1500:]}"
        for number, (code, err) in enumerate(replica.outcome(deadline) for replica in replicas)
        if code != 0
    ]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("gap_s", [0.0, 0.15], ids=["together", "0.15s-apart"])
def test_every_replica_opens_an_empty_database_and_it_ends_at_head(
    pg_url: str, replicas: list[Replica], gap_s: float, online_catalog: dict[str, Any]
) -> None:
    _all_open(replicas, gap_s)
    assert current_revision(pg_url) == HEAD
    assert catalog(pg_url) == online_catalog


def test_async_and_sync_openers_in_one_process_both_open_an_empty_database(pg_url: str) -> None:
    go = threading.Barrier(3)
    outcomes: list[object] = []

    def open_sync() -> None:
        go.wait()
        try:
            SessionDB(url=pg_url).close()
            outcomes.append("sync")
        except Exception as exc:  # reported by the assertion below
            outcomes.append(exc)

    async def open_async() -> None:
        go.wait()
        async with AsyncSessionDB(url=pg_url) as store:
            await store.create_session("async-opener", "api")

    threads = [threading.Thread(target=open_sync, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    asyncio.run(open_async())
    for thread in threads:
        thread.join(timeout=DEADLINE_S)
    assert outcomes == ["sync", "sync"]
    assert current_revision(pg_url) == HEAD


BUILT_FAR = 80
"""Relation locks the build's transaction holds once it is well past its first revisions
(at head it holds about 140; no single revision's transaction of a build revision by
revision comes near)."""


def _migrator_building(url: str) -> bool:
    """True once the migrator session has created a good part of the schema, uncommitted:
    its transaction has an id and holds locks on :data:`BUILT_FAR` relations."""
    return bool(
        scalar(
            url,
            f"SELECT count(*) >= {BUILT_FAR} FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid "
            f"WHERE a.application_name = '{MIGRATOR}' AND a.datname = current_database() "
            "AND a.backend_xid IS NOT NULL AND l.locktype = 'relation'",
        )
    )


def _no_migrator(url: str) -> bool:
    return not scalar(
        url,
        f"SELECT count(*) FROM pg_stat_activity WHERE application_name = '{MIGRATOR}' "
        "AND datname = current_database()",
    )


def test_a_first_opener_killed_mid_build_leaves_the_database_empty(
    pg_url: str, online_catalog: dict[str, Any]
) -> None:
    first = Replica(pg_url)
    try:
        first.wait_ready()
        first.open()
        wait_for(lambda: _migrator_building(pg_url), "the first opener's build", timeout_s=DEADLINE_S)
        first.process.send_signal(signal.SIGKILL)
        assert first.process.wait(timeout=10) == -signal.SIGKILL
    finally:
        first.kill()
    wait_for(lambda: _no_migrator(pg_url), "the killed build's session to end", timeout_s=30)
    assert scalar(pg_url, "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace") == 0
    assert current_revision(pg_url) is None

    SessionDB(url=pg_url).close()  # the next opener builds it
    assert current_revision(pg_url) == HEAD
    assert catalog(pg_url) == online_catalog


@contextmanager
def migration_lock(pg_url: str) -> Iterator[sa.Engine]:
    """An engine over one session that holds the migrators' lock (no transaction open), as
    a running migrator does. An upgrade run through this engine takes the lock again (it
    is reentrant for its session) and lets it go when it ends the session; disposing of
    the engine lets it go too."""
    engine = sa.create_engine(pg_url, poolclass=sa.pool.StaticPool)
    with engine.connect() as connection:
        connection.exec_driver_sql(f"SELECT pg_advisory_lock({MIGRATION_LOCK_KEY})")
        connection.commit()
    try:
        yield engine
    finally:
        engine.dispose()


def test_a_migrator_waiting_for_the_lock_never_stalls_a_concurrent_index_build(pg_url: str) -> None:
    migrate_to(pg_url, "0018")
    with migration_lock(pg_url) as holder:
        _build_an_index_while_an_upgrade_waits(pg_url, holder)
    assert current_revision(pg_url) == HEAD


def _build_an_index_while_an_upgrade_waits(pg_url: str, holder: sa.Engine) -> None:
    """The case replicas queueing behind a first deploy hit: a waiter that has polled the
    lock a while (its statement prepared by the driver) and has seen another session's DDL
    commit would, inside one long transaction, hold back the snapshot horizon that every
    ``CREATE INDEX CONCURRENTLY`` of the database waits out."""
    waiter = threading.Thread(target=migrate.upgrade, args=(pg_url,), daemon=True)
    waiter.start()
    wait_for(lambda: not _no_migrator(pg_url), "the upgrade to wait for the lock", timeout_s=30)
    time.sleep(2.0)  # a few polls
    builder = engine_for(pg_url).execution_options(isolation_level="AUTOCOMMIT")
    with builder.connect() as connection:
        connection.exec_driver_sql("CREATE TABLE test_first_deploy_ddl (id integer)")
        time.sleep(0.6)  # the waiter polls again after the catalog changed
        connection.exec_driver_sql("SET statement_timeout = '15s'")
        connection.exec_driver_sql("CREATE INDEX CONCURRENTLY idx_test_first_deploy ON sessions (model)")
        connection.exec_driver_sql("DROP INDEX CONCURRENTLY idx_test_first_deploy")
        connection.exec_driver_sql("DROP TABLE test_first_deploy_ddl")
    builder.dispose()
    assert waiter.is_alive() and current_revision(pg_url) == "0018"
    holder.dispose()  # the running migrator ends: the waiter takes over
    waiter.join(timeout=DEADLINE_S)


def test_an_old_schema_that_a_running_migration_moves_forward_is_waited_for(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schema too old to run on, while a migration of it advances (an older release
    building the database revision by revision), is opened once the migration is done."""
    monkeypatch.setattr(migrate, "STALLED_MIGRATION_S", 30.0)  # the host may be slow
    migrate_to(pg_url, "0005")
    opened: list[object] = []

    def open_store() -> None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", migrate.SchemaBehindWarning)
                SessionDB(url=pg_url).close()
            opened.append(current_revision(pg_url))
        except Exception as exc:  # reported by the assertion below
            opened.append(exc)

    with migration_lock(pg_url) as holder:
        opener = threading.Thread(target=open_store, daemon=True)
        opener.start()
        time.sleep(1.0)
        assert opener.is_alive(), opened  # it found 0005 and waits instead of refusing
        migrate.upgrade(holder)  # the lock holder runs the rest of the upgrade, online
        opener.join(timeout=DEADLINE_S)
    assert opened == [HEAD]


def test_an_old_schema_whose_migration_stands_still_is_refused(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(migrate, "STALLED_MIGRATION_S", 0.5)
    migrate_to(pg_url, "0005")
    with migration_lock(pg_url), pytest.raises(SchemaBehind, match="revision 0005") as refused:
        SessionDB(url=pg_url)
    assert "another process is migrating it but has not moved it lately" in str(refused.value)
    assert str(refused.value).endswith("upgrade'")
    assert current_revision(pg_url) == "0005"


def test_upgrade_command_builds_an_empty_database_in_one_transaction(pg_url: str) -> None:
    """``hermes-store upgrade`` on an empty database: one transaction, so the database
    goes from no table to head in one commit (a single transaction id wrote every row)."""
    result = subprocess.run(
        [sys.executable, "-m", "hermes_store.cli", "--url", pg_url, "upgrade"],
        cwd=REPO_ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert current_revision(pg_url) == HEAD
    writers = scalar(
        pg_url,
        "SELECT count(DISTINCT xmin::text) FROM pg_class WHERE relnamespace = 'public'::regnamespace",
    )
    assert writers == 1
