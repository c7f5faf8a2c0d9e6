"""PostgreSQL fixtures: a fresh database per test on the server ``pg_admin_url`` gives.

That server is ``HERMES_TEST_PG_URL``'s, or a throwaway one (see ``tests/pg_server.py``);
without either the tests skip with the reason; with HERMES_TEST_REQUIRE_PG=1 (as CI
sets) a missing or unreachable server fails them instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa


@pytest.fixture
def pg_url(pg_admin_url: str) -> Iterator[str]:
    """URL of a new, empty PostgreSQL database, dropped after the test."""
    admin = sa.make_url(pg_admin_url)
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
