"""One engine factory for the sync and the async store: the same server options, pool and
SQLite pragmas, whichever store (and whichever asyncio driver) opens the database.

On PostgreSQL each setting is read back from the server (``SHOW``) on a connection of the
store's own pool.
"""

from __future__ import annotations

import asyncio
import importlib.util
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine as sa_create_async_engine

from hermes_store import SessionDB
from hermes_store.aio import AsyncSessionDB
from hermes_store.db.engine import asyncpg_connect_args

ASYNC_DRIVERS = [
    "psycopg_async",
    pytest.param(
        "asyncpg",
        marks=pytest.mark.skipif(importlib.util.find_spec("asyncpg") is None, reason="asyncpg not installed"),
    ),
]


def _with_driver(url: str, driver: str, query: str = "") -> str:
    rendered = sa.make_url(url).set(drivername=f"postgresql+{driver}").render_as_string(hide_password=False)
    return rendered + query


async def _show(db: AsyncSessionDB, *settings: str) -> list[str]:
    await db.open()
    async with db.engine.connect() as connection:
        return [str((await connection.exec_driver_sql(f"SHOW {name}")).scalar()) for name in settings]


def _show_sync(db: SessionDB, *settings: str) -> list[str]:
    with db.engine.connect() as connection:
        return [str(connection.exec_driver_sql(f"SHOW {name}").scalar()) for name in settings]


@pytest.mark.postgres
@pytest.mark.parametrize("driver", ASYNC_DRIVERS)
def test_the_async_store_applies_server_options_given_as_keywords(aio_pg_url: str, driver: str) -> None:
    async def main() -> tuple[list[str], int]:
        db = AsyncSessionDB(
            url=_with_driver(aio_pg_url, driver), statement_timeout="1234ms", lock_timeout=2500, pool_size=3
        )
        try:
            return await _show(db, "statement_timeout", "lock_timeout"), db.engine.pool.size()  # type: ignore[attr-defined]
        finally:
            await db.close()

    shown, pool_size = asyncio.run(main())
    assert shown == ["1234ms", "2500ms"]
    assert pool_size == 3


@pytest.mark.postgres
@pytest.mark.parametrize("driver", ASYNC_DRIVERS)
def test_the_async_store_takes_server_options_in_the_urls_query(aio_pg_url: str, driver: str) -> None:
    """The documented URL form, which once reached the driver as unknown connection options."""

    async def main() -> tuple[list[str], int]:
        url = _with_driver(aio_pg_url, driver, "?statement_timeout=30s&lock_timeout=3s&pool_size=7")
        db = AsyncSessionDB(url)
        try:
            await db.create_session("query-options", "cli")
            return await _show(db, "statement_timeout", "lock_timeout"), db.engine.pool.size()  # type: ignore[attr-defined]
        finally:
            await db.close()

    shown, pool_size = asyncio.run(main())
    assert shown == ["30s", "3s"]
    assert pool_size == 7


@pytest.mark.postgres
def test_sync_and_async_stores_get_the_same_default_server_options(aio_pg_url: str) -> None:
    with SessionDB(url=aio_pg_url) as sync_db:
        sync_shown = _show_sync(sync_db, "statement_timeout", "lock_timeout")

    async def main() -> list[str]:
        db = AsyncSessionDB(url=aio_pg_url)
        try:
            return await _show(db, "statement_timeout", "lock_timeout")
        finally:
            await db.close()

    assert asyncio.run(main()) == sync_shown == ["1min", "10s"]


@pytest.mark.postgres
def test_the_sync_store_applies_the_same_keywords(aio_pg_url: str) -> None:
    with SessionDB(url=aio_pg_url, statement_timeout="1234ms", lock_timeout=2500) as db:
        assert _show_sync(db, "statement_timeout", "lock_timeout") == ["1234ms", "2500ms"]


@pytest.mark.postgres
def test_an_injected_engines_connect_arguments_serve_the_schema_too(pg_url: str) -> None:
    """The schema is made through the caller's engine: here its search_path, set only in
    connect_args, decides where the tables go."""
    schema = f"injected_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(pg_url)
    with admin.begin() as connection:
        connection.exec_driver_sql(f"CREATE SCHEMA {schema}")

    async def main() -> None:
        engine = sa_create_async_engine(
            _with_driver(pg_url, "psycopg_async"), connect_args={"options": f"-c search_path={schema}"}
        )
        db = AsyncSessionDB(engine=engine)
        try:
            await db.create_session("s", "cli")
        finally:
            await db.close()
            await engine.dispose()

    try:
        asyncio.run(main())
        with admin.connect() as connection:
            placed = connection.exec_driver_sql(
                "SELECT table_schema FROM information_schema.tables WHERE table_name = 'sessions'"
            ).all()
            assert placed == [(schema,)]
            assert connection.exec_driver_sql(f"SELECT id FROM {schema}.sessions").all() == [("s",)]
    finally:
        admin.dispose()


def test_libpq_options_become_asyncpg_server_settings() -> None:
    translated = asyncpg_connect_args(
        {"options": "-c statement_timeout=60s -c lock_timeout=10s", "connect_timeout": 5, "keepalives": 1}
    )
    assert translated == {
        "server_settings": {"statement_timeout": "60s", "lock_timeout": "10s"},
        "timeout": 5.0,
    }
    with pytest.raises(ValueError, match="server settings"):
        asyncpg_connect_args({"options": "--no-such-flag"})


def _pragmas(connection: sa.Connection) -> list[object]:
    names = ("journal_mode", "foreign_keys", "busy_timeout", "recursive_triggers")
    return [connection.exec_driver_sql(f"PRAGMA {name}").scalar() for name in names]


def test_sync_and_async_sqlite_connections_get_the_same_pragmas(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionDB(path) as db, db.engine.connect() as connection:
        sync_pragmas = _pragmas(connection)

    async def main() -> list[object]:
        db = AsyncSessionDB(path)
        try:
            await db.open()
            async with db.engine.connect() as connection:
                return await connection.run_sync(_pragmas)
        finally:
            await db.close()

    assert asyncio.run(main()) == sync_pragmas == ["wal", 1, 1000, 1]


@pytest.mark.postgres
@pytest.mark.parametrize("driver", ["psycopg", *ASYNC_DRIVERS])
def test_timeouts_in_the_callers_own_options_win_over_the_stores_defaults(
    aio_pg_url: str, driver: str
) -> None:
    options = {"connect_args": {"options": "-c statement_timeout=4321ms -c lock_timeout=1234"}}
    url = _with_driver(aio_pg_url, driver)
    if driver == "psycopg":
        with SessionDB(url=url, **options) as sync_db:
            assert _show_sync(sync_db, "statement_timeout", "lock_timeout") == ["4321ms", "1234ms"]
        return

    async def main() -> list[str]:
        db = AsyncSessionDB(url=url, **options)
        try:
            return await _show(db, "statement_timeout", "lock_timeout")
        finally:
            await db.close()

    assert asyncio.run(main()) == ["4321ms", "1234ms"]
