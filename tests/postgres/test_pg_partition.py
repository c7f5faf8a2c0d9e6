"""A silent network partition never holds the writer lock past the reconnect budget.

The store reaches the server through a local TCP proxy (:mod:`stalling_proxy`) that stops
forwarding without closing anything, as a partition the kernel cannot see does: TCP stays
up, no reply ever arrives. A write already in flight (waiting on a row lock) fails with a
typed error, and a second thread's write queued behind it does too, each within a bound
of a few times the documented worst case instead of waiting forever. The proxy is closed
at the end whatever happens, which releases anything still stuck.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import pytest
import sqlalchemy as sa
from stalling_proxy import StallingProxy

from hermes_store import ServerUnavailable, SessionDB, StoreTimeout, create_engine
from hermes_store.db import reply_watchdog
from hermes_store.db.reply_watchdog import REPLY_GRACE_S

# Not serial: both tests wait on timers (timeouts, pg_sleep), not on CPU, and their bounds
# are several times the documented worst case, so running beside other tests only lets
# those use the cores while these wait.

STATEMENT_TIMEOUT_S = 3
CONNECT_TIMEOUT_S = 2
RECONNECT_WAIT_S = 3.0
WORST_CASE_S = STATEMENT_TIMEOUT_S + REPLY_GRACE_S + RECONNECT_WAIT_S + CONNECT_TIMEOUT_S
"""docs/postgresql.md: a write stalled by a silent network fails within this."""
BOUND_S = 3 * WORST_CASE_S  # generous (the machine is loaded); without a limit it is forever


def _until(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def test_a_silent_partition_fails_writes_within_the_budget(pg_url: str) -> None:
    direct = sa.make_url(pg_url)
    admin = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    with StallingProxy(direct.host or "127.0.0.1", direct.port or 5432) as proxy:
        url = direct.set(host="127.0.0.1", port=proxy.port)
        db = SessionDB(
            url=url, statement_timeout=f"{STATEMENT_TIMEOUT_S}s", connect_timeout=CONNECT_TIMEOUT_S
        )
        db._uow.reconnect_wait_s = RECONNECT_WAIT_S
        db.create_session("s", "cli")
        db.append_message("s", "user", "before the partition")
        outcomes: dict[str, tuple[object, float]] = {}

        def write(name: str) -> None:
            started = time.monotonic()
            try:
                db.append_message("s", "user", name)
                outcomes[name] = ("applied", time.monotonic() - started)
            except Exception as exc:  # recorded, asserted below
                outcomes[name] = (exc, time.monotonic() - started)

        first = threading.Thread(target=write, args=("in flight",), daemon=True)
        second = threading.Thread(target=write, args=("queued",), daemon=True)
        with admin.connect() as holder, holder.begin():
            holder.exec_driver_sql("SELECT 1 FROM sessions WHERE id = 's' FOR UPDATE")
            first.start()

            def first_is_waiting() -> bool:
                with admin.connect() as probe:
                    waiting = probe.exec_driver_sql(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                    ).scalar()
                return bool(waiting)

            _until(first_is_waiting)
            proxy.stall()
            second.start()
        # The row lock is gone: the server answers the first write, but nothing comes through.
        first.join(timeout=BOUND_S)
        second.join(timeout=BOUND_S)
        stuck = [t.name for t in (first, second) if t.is_alive()]
    # The proxy is closed (a stuck write fails now) before the store waits for its writers.
    db.close()
    assert not stuck, f"writes still waiting after {BOUND_S} s: {outcomes}"
    for name in ("in flight", "queued"):
        error, elapsed = outcomes[name]
        assert isinstance(error, ServerUnavailable | StoreTimeout), (name, repr(error))
        print(f"{name}: {type(error).__name__} after {elapsed:.1f} s (bound {BOUND_S:.0f} s)")
        assert elapsed < BOUND_S, (name, elapsed)
    with admin.connect() as check:
        contents = check.exec_driver_sql("SELECT content FROM messages ORDER BY id").scalars().all()
    # Nothing half-applied: the first write either committed whole before the cut or not at all.
    assert contents[0] == "before the partition" and "queued" not in contents
    admin.dispose()


def test_a_statement_whose_timeout_was_lifted_is_never_cut(pg_url: str) -> None:
    """Migrations lift ``statement_timeout`` (for their transaction or their session): the
    watchdog follows the ``SET`` and leaves such a statement to run past its usual limit."""
    engine = create_engine(pg_url, statement_timeout="1s", poolclass=sa.pool.NullPool)  # limit: 3 s
    with engine.connect() as connection:
        assert _watchdog_limit_s(connection) == 1 + REPLY_GRACE_S  # watched, with the engine's limit
        with connection.begin():
            connection.exec_driver_sql("SET LOCAL statement_timeout = 0")
            assert _watchdog_limit_s(connection) == math.inf
            connection.exec_driver_sql("SELECT pg_sleep(4)")
        assert _watchdog_limit_s(connection) == 1 + REPLY_GRACE_S  # SET LOCAL ended with it
        connection.exec_driver_sql("SET statement_timeout TO '0'")
        connection.exec_driver_sql("SELECT pg_sleep(4)")
        connection.commit()
        assert _watchdog_limit_s(connection) == math.inf
        connection.exec_driver_sql("RESET statement_timeout")  # back to the engine's 1 s
        with pytest.raises(sa.exc.OperationalError, match="statement timeout"):
            connection.exec_driver_sql("SELECT pg_sleep(2)")  # the server cancels it and says so
    engine.dispose()


def _watchdog_limit_s(connection: sa.Connection) -> float:
    """How long the reply watchdog now lets a statement of ``connection`` run."""
    entry = reply_watchdog._WATCHDOG.get(connection.connection.dbapi_connection)
    assert entry is not None, "the connection is not watched"
    return entry.limit_s


def _sleeps_uncut(connection: sa.Connection, seconds: float) -> None:
    connection.exec_driver_sql(f"SELECT pg_sleep({seconds})")


def test_a_rolled_back_set_is_forgotten_as_the_server_forgets_it(pg_url: str) -> None:
    """A session ``SET`` inside a transaction that rolls back is undone by the server; the
    watchdog must not keep the shorter limit (which would cut a statement the server lets run)."""
    engine = create_engine(pg_url, statement_timeout="10s", poolclass=sa.pool.NullPool)
    with engine.connect() as connection:
        with connection.begin() as transaction:
            connection.exec_driver_sql("SET statement_timeout = '1s'")
            transaction.rollback()
        assert connection.exec_driver_sql("SHOW statement_timeout").scalar() == "10s"
        connection.rollback()
        assert _watchdog_limit_s(connection) == 10 + REPLY_GRACE_S
        _sleeps_uncut(connection, 4)  # past 1 s + the grace, well within the server's 10 s
        connection.rollback()
        with connection.begin():
            connection.exec_driver_sql("SET statement_timeout = '1s'")  # committed: it stays
        with pytest.raises(sa.exc.OperationalError, match="statement timeout"):
            _sleeps_uncut(connection, 2)
    engine.dispose()


@pytest.mark.parametrize(
    "lifting",
    [
        "SELECT set_config('statement_timeout', '0', false)",
        "SELECT 1; SET statement_timeout = 0",
        "DO $$ BEGIN PERFORM set_config('statement_timeout', '0', false); END $$",
    ],
    ids=["set_config", "multi-statement", "do-block"],
)
def test_a_timeout_changed_in_a_form_the_watchdog_cannot_read_is_asked_of_the_server(
    pg_url: str, lifting: str
) -> None:
    engine = create_engine(pg_url, statement_timeout="1s", poolclass=sa.pool.NullPool)  # limit: 3 s
    with engine.connect() as connection:
        connection.exec_driver_sql(lifting)
        connection.commit()
        _sleeps_uncut(connection, 4)
        connection.commit()
        connection.exec_driver_sql("SELECT set_config('statement_timeout', '1s', false)")
        connection.commit()
        with pytest.raises(sa.exc.OperationalError, match="statement timeout"):
            _sleeps_uncut(connection, 2)
    engine.dispose()


def test_a_transaction_ended_behind_the_engines_back_is_asked_of_the_server(pg_url: str) -> None:
    """A transaction that lifted the timeout and was committed on the raw driver connection
    (no SQLAlchemy event sees it) leaves the watchdog asking the server, not guessing."""
    engine = create_engine(pg_url, statement_timeout="1s", poolclass=sa.pool.NullPool)  # limit: 3 s
    with engine.connect() as connection:
        connection.begin()
        connection.exec_driver_sql("SET statement_timeout = 0")
        connection.connection.driver_connection.commit()  # the server keeps it: no limit
        _sleeps_uncut(connection, 4)
        connection.rollback()
    engine.dispose()
