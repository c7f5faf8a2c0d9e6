"""PostgreSQL fixtures: a fresh database per test on the server named by HERMES_TEST_PG_URL.

Without that variable (or without a reachable server) the tests skip with the reason;
with HERMES_TEST_REQUIRE_PG=1 (as CI sets) an unreachable server fails them instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

PG_URL_VARIABLE = "HERMES_TEST_PG_URL"


def _admin_url() -> sa.URL:
    configured = os.environ.get(PG_URL_VARIABLE)
    if not configured:
        reason = f"{PG_URL_VARIABLE} is not set: no PostgreSQL server to test against"
        if os.environ.get("HERMES_TEST_REQUIRE_PG"):
            pytest.fail(reason)
        pytest.skip(reason)
    return sa.make_url(configured)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """URL of a new, empty PostgreSQL database, dropped after the test."""
    admin = _admin_url()
    name = f"hermes_t_{uuid.uuid4().hex[:12]}"
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
