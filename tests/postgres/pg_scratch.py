"""Scratch PostgreSQL databases for tests that outlive one test function.

The ``pg_url`` fixture (conftest) gives each test a fresh database; the tests here that
load tens of thousands of rows share one per module instead, created and dropped by
:func:`scratch_database` on the same server (``HERMES_TEST_PG_URL``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

PG_URL_VARIABLE = "HERMES_TEST_PG_URL"


def admin_url() -> sa.URL:
    """The configured server URL; skips (or fails, when CI requires PostgreSQL) without one."""
    configured = os.environ.get(PG_URL_VARIABLE)
    if not configured:
        reason = f"{PG_URL_VARIABLE} is not set: no PostgreSQL server to test against"
        if os.environ.get("HERMES_TEST_REQUIRE_PG"):
            pytest.fail(reason)
        pytest.skip(reason)
    return sa.make_url(configured)


@contextmanager
def scratch_database(prefix: str = "hermes_s") -> Iterator[str]:
    """Create an empty database, yield its URL, drop it afterwards."""
    admin = admin_url()
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    except sa.exc.OperationalError as exc:
        if os.environ.get("HERMES_TEST_REQUIRE_PG"):
            raise
        pytest.skip(f"PostgreSQL at {admin.render_as_string()} is unreachable: {exc.orig}")
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        engine.dispose()
