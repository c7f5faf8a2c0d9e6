"""Which PostgreSQL server the tests use: the configured one, a throwaway one, or none.

* ``HERMES_TEST_PG_URL`` set (CI's ``.ci/run`` does this): that server, used as an admin
  URL under which every test run creates and drops databases of its own.
* Not set, but PostgreSQL's server binaries are installed (``pg_ctl`` on ``PATH`` or under
  ``/usr/lib/postgresql/*/bin``): a throwaway cluster in a temporary directory, on a free
  port, started by pytest-postgresql's ``PostgreSQLExecutor`` and removed afterwards — so a
  machine with PostgreSQL installed but no server running still runs the PostgreSQL tests.
* Neither: the PostgreSQL tests skip (they fail instead with ``HERMES_TEST_REQUIRE_PG=1``).

``HERMES_TEST_PG_BINDIR`` overrides where the binaries are looked for; set it to ``none``
to behave as on a machine without PostgreSQL. ``python tests/pg_server.py`` prints the
mode (``configured``, ``throwaway`` or ``none``): ``scripts/check`` uses it to decide which
modules the coverage gate measures.

:class:`ThrowawayServer` is reusable by any test that needs a server of its own (e.g. to
restart it): ``with ThrowawayServer() as server: server.url("postgres")``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

import sqlalchemy as sa

PG_URL_VARIABLE = "HERMES_TEST_PG_URL"
REQUIRE_VARIABLE = "HERMES_TEST_REQUIRE_PG"
BINDIR_VARIABLE = "HERMES_TEST_PG_BINDIR"
_NO_BINARIES = ("", "none", "0")
_SEARCHED = "/usr/lib/postgresql"
# The server runs under this account when the tests run as root (postgres refuses root).
_SERVICE_USER = "postgres"
# A throwaway cluster holds nothing worth an fsync.
_FAST_SETTINGS = "-c fsync=off -c full_page_writes=off -c synchronous_commit=off -c max_connections=200"


def find_pg_ctl() -> Path | None:
    """The ``pg_ctl`` the throwaway server would use, or ``None`` when there is none."""
    configured = os.environ.get(BINDIR_VARIABLE)
    if configured is not None:
        if configured.strip().lower() in _NO_BINARIES:
            return None
        candidate = Path(configured) / "pg_ctl"
        return candidate if candidate.is_file() else None
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path)
    installed = sorted(Path(_SEARCHED).glob("*/bin/pg_ctl"), key=lambda p: _version_key(p.parent.parent.name))
    return installed[-1] if installed else None


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def mode() -> str:
    """``configured`` (``HERMES_TEST_PG_URL``), ``throwaway`` (binaries found) or ``none``."""
    if os.environ.get(PG_URL_VARIABLE, "").strip():
        return "configured"
    if _driver_missing():
        return "none"
    return "throwaway" if find_pg_ctl() is not None else "none"


def _driver_missing() -> bool:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return True
    return False


class ThrowawayServer:
    """A private PostgreSQL cluster (trust auth, user ``postgres``) for as long as it is open."""

    def __init__(self, pg_ctl: Path | None = None) -> None:
        found = pg_ctl or find_pg_ctl()
        if found is None:
            raise RuntimeError("no PostgreSQL server binaries (pg_ctl) on this machine")
        self.pg_ctl = found
        self.base = Path(tempfile.mkdtemp(prefix="hermes-pg-"))
        self.port = 0
        self._executor: object | None = None

    def url(self, database: str = "postgres") -> str:
        """A SQLAlchemy URL for ``database`` on this server."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _executable(self) -> str:
        if not hasattr(os, "geteuid") or os.geteuid() != 0:
            return str(self.pg_ctl)
        # As root, run every pg_ctl call as the service account, in a folder it owns.
        shutil.chown(self.base, _SERVICE_USER, _SERVICE_USER)
        wrapper = self.base / "pg_ctl"
        become = f"setpriv --reuid={_SERVICE_USER} --regid={_SERVICE_USER} --init-groups"
        wrapper.write_text(f'#!/bin/sh\nexec {become} "{self.pg_ctl}" "$@"\n')
        wrapper.chmod(0o755)
        return str(wrapper)

    def start(self) -> ThrowawayServer:
        """Create the cluster (first time) and start the server; returns ``self``."""
        from port_for import select_random
        from pytest_postgresql.executors import PostgreSQLExecutor

        if self._executor is None:
            self.port = select_random()
            self._executor = PostgreSQLExecutor(
                executable=self._executable(),
                host="127.0.0.1",
                port=self.port,
                datadir=str(self.base / "data"),
                unixsocketdir=str(self.base),
                logfile=str(self.base / "server.log"),
                startparams="-w",
                dbname="postgres",
                postgres_options=_FAST_SETTINGS,
            )
        self._executor.start()  # type: ignore[attr-defined]
        self._wait_until_ready()
        return self

    def _wait_until_ready(self, timeout_s: float = 60.0) -> None:
        # The executor returns once the port accepts connections, which is before the
        # server accepts sessions ("the database system is starting up").
        import psycopg

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres").close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        """Stop the server (fast shutdown); the cluster stays for another :meth:`start`."""
        if self._executor is not None:
            self._executor.stop()  # type: ignore[attr-defined]

    def close(self) -> None:
        """Stop the server and delete the cluster."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> ThrowawayServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def psql_available() -> bool:
    """True when a ``psql`` client is on ``PATH`` or beside the server binaries."""
    return psql_path() is not None


def psql_path() -> str | None:
    """The ``psql`` client to run offline SQL through, or ``None``."""
    pg_ctl = find_pg_ctl()
    if pg_ctl is not None and (pg_ctl.parent / "psql").is_file():
        return str(pg_ctl.parent / "psql")
    if os.environ.get(BINDIR_VARIABLE, "x").strip().lower() in _NO_BINARIES:
        return None
    return shutil.which("psql")


if __name__ == "__main__":
    print(mode())
    sys.exit(0)


__all__ = ["ThrowawayServer", "find_pg_ctl", "mode", "psql_path"]


@contextmanager
def scratch_database(
    admin_url: str,
    prefix: str = "hermes_s",
    *,
    drop_in_background: bool = False,
    wait_for_wal_flush: bool = True,
    template: str | None = None,
) -> Iterator[str]:
    """Create an empty database on ``admin_url``'s server, yield its URL, drop it afterwards
    (with ``drop_in_background``, through :func:`drop_later`: only for tests under the
    ``pg_admin_url`` fixture, which waits for those drops).

    ``wait_for_wal_flush=False`` sets the database's ``synchronous_commit`` to ``off``: a
    commit returns before its WAL reaches the disk (a server crash could lose the last
    ones; a client's crash loses nothing). For suites that check answers, never a server
    crash: each of their thousands of commits then skips an fsync.

    ``template`` names a database to copy (``CREATE DATABASE … TEMPLATE``) instead of an
    empty one.
    """
    admin = sa.make_url(admin_url)
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        copy = f' TEMPLATE "{template}"' if template else ""
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"{copy}')
        if not wait_for_wal_flush:
            connection.exec_driver_sql(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        engine.dispose()
        if drop_in_background:
            drop_later(admin_url, name)
        else:
            _drop(admin_url, name)


_dropper: ThreadPoolExecutor | None = None
_drops: list[Future[None]] = []


def _admin_statement(admin_url: str, statement: str) -> None:
    engine = sa.create_engine(
        sa.make_url(admin_url), isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool
    )
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql(statement)
    finally:
        engine.dispose()


def _drop(admin_url: str, name: str) -> None:
    _admin_statement(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def drop_later(admin_url: str, name: str) -> None:
    """Drop database ``name`` in this process's background thread (``WITH (FORCE)``).

    A ``DROP DATABASE`` waits for a checkpoint of the whole server (seconds when other
    databases have many dirty pages); a test's teardown need not wait for it. The drops
    run one at a time, in order; :func:`finish_drops` waits for them all and raises the
    first error (the ``pg_admin_url`` fixture calls it before its server goes away).
    """
    global _dropper
    if _dropper is None:
        _dropper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="drop-database")
    _drops.append(_dropper.submit(_drop, admin_url, name))


SHARED_RECORD = ".shared-database"
"""Suffix of the file naming a database :func:`shared_database` built for the whole run."""


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created if missing) while the block lasts."""
    import fcntl

    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


SharedDatabase = Callable[[str, Callable[[str], None]], str]
"""The type of the ``shared_pg_database`` fixture (``tests/conftest.py``): ``get(key, build)``
gives the URL of the run's database ``key``, which ``build(url)`` filled once."""


def shared_database(
    admin_url: str, key: str, build: Callable[[str], None], registry: Path
) -> tuple[str, bool]:
    """The URL of database ``key``, built by ``build(url)`` by the first process to ask.

    ``registry`` is a folder every process of the run sees (under xdist, the one the
    controller made, ``tests/conftest.py``): the first process holds its lock while it creates the
    database and builds it, then writes the database's name there; the others wait for
    the lock and read the name. Returns ``(url, built_here)``. Whoever builds nothing
    drops nothing: :func:`drop_shared` (the xdist controller, once every worker is done)
    or the builder itself (a run without workers) drops it.
    """
    admin = sa.make_url(admin_url)
    record = registry / f"{key}{SHARED_RECORD}"
    with _locked(registry / f"{key}.lock"):
        if record.exists():
            return admin.set(database=record.read_text()).render_as_string(hide_password=False), False
        name = f"hermes_{key}_{uuid.uuid4().hex[:10]}"
        _admin_statement(admin_url, f'CREATE DATABASE "{name}"')
        url = admin.set(database=name).render_as_string(hide_password=False)
        try:
            build(url)
        except BaseException:
            _drop(admin_url, name)
            raise
        record.write_text(name)
        return url, True


def drop_shared(admin_url: str, registry: Path) -> None:
    """Drop every database :func:`shared_database` recorded in ``registry``."""
    for record in sorted(registry.glob(f"*{SHARED_RECORD}")):
        _drop(admin_url, record.read_text())
        record.unlink()


def finish_drops() -> None:
    """Wait for every database :func:`drop_later` was given; raise the first failure."""
    pending = list(_drops)
    _drops.clear()
    for future in pending:
        future.result()
