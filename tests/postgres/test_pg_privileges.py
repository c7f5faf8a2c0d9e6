"""A role without the rights a store needs gets a one-line ``StoreError``, not SQL text.

The first open of an empty database creates the schema; a role that may not create tables
there (``CREATE`` on schema ``public`` revoked, as PostgreSQL 15 does for every role but
the database owner) must hear which privilege is missing and what to do about it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from hermes_store import InsufficientPrivilege, SessionDB, StoreError
from hermes_store.aio import AsyncSessionDB

pytestmark = pytest.mark.postgres

needs_asyncpg = pytest.mark.skipif(
    importlib.util.find_spec("asyncpg") is None, reason="asyncpg not installed"
)


@pytest.fixture
def role_without_create(pg_url: str) -> Iterator[str]:
    """``pg_url`` for a new login role that may connect but not create in schema public."""
    role = f"hermes_no_create_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE ROLE "{role}" LOGIN'))
        connection.execute(sa.text(f'REVOKE CREATE ON SCHEMA public FROM PUBLIC, "{role}"'))
    try:
        yield sa.make_url(pg_url).set(username=role, password=None).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(
                sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = :role"),
                {"role": role},
            )
            connection.execute(sa.text(f'DROP ROLE "{role}"'))
        admin.dispose()


def _open_async(url: str) -> None:
    async def main() -> None:
        db = AsyncSessionDB(url=url)
        try:
            await db.open()
        finally:
            await db.close()

    asyncio.run(main())


@pytest.mark.parametrize(
    "driver",
    [
        "psycopg",
        "psycopg_async",
        pytest.param("asyncpg", marks=needs_asyncpg),
    ],
)
def test_first_open_by_a_role_that_may_not_create_tables_says_so_in_one_line(
    role_without_create: str, driver: str
) -> None:
    url = sa.make_url(role_without_create).set(drivername=f"postgresql+{driver}")
    with pytest.raises(InsufficientPrivilege) as raised:
        if driver == "psycopg":
            SessionDB(url=url)
        else:
            _open_async(url.render_as_string(hide_password=False))
    message = str(raised.value)
    assert isinstance(raised.value, StoreError)
    assert "\n" not in message
    assert "permission denied for schema public" in message
    assert "CREATE TABLE" not in message  # no SQL text
    assert "grant" in message.lower()
