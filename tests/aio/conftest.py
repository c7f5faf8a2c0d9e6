"""Fixtures of the asyncio tests: other processes, and a fresh store per test."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from aio_support import Processes  # noqa: E402
from support import pg_store_emptier  # noqa: E402

from hermes_store import SessionDB  # noqa: E402


@pytest.fixture
def processes() -> Iterator[Processes]:
    """Start worker processes; they are reaped after the test."""
    group = Processes()
    try:
        yield group
    finally:
        for process in group.started:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)
            if process.stdout is not None:
                process.stdout.close()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A freshly created SQLite store (schema at head) in ``tmp_path``."""
    path = tmp_path / "state.db"
    SessionDB(path).close()
    return path


@pytest.fixture(scope="session")
def aio_pg_url(pg_admin_url: str, pg_head_template: str) -> Iterator[str]:
    """A fresh PostgreSQL database at head for the asyncio tests (dropped afterwards): a
    copy of the run's ``pg_head_template``.

    On the server the root conftest provides (``HERMES_TEST_PG_URL`` or a throwaway one).
    """
    from pg_server import scratch_database

    with scratch_database(
        pg_admin_url, prefix="hermes_aio", wait_for_wal_flush=False, template=pg_head_template
    ) as url:
        yield url


@pytest.fixture(scope="session")
def aio_pg_emptier(aio_pg_url: str) -> Iterator[Callable[[], None]]:
    """Empties the asyncio tests' PostgreSQL store (one connection for the whole run)."""
    with pg_store_emptier(aio_pg_url) as empty:
        yield empty


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store on each backend: a SQLite file, or emptied PostgreSQL tables."""
    if request.param == "sqlite":
        path = tmp_path / "state.db"
        SessionDB(path).close()
        return f"sqlite:///{path}"
    request.getfixturevalue("aio_pg_emptier")()
    return str(request.getfixturevalue("aio_pg_url"))
