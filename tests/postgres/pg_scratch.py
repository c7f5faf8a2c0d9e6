"""Scratch PostgreSQL databases for tests that outlive one test function.

The ``pg_url`` fixture (``tests/conftest.py``) gives each test a fresh database; the
tests here that load tens of thousands of rows share one per module instead, created
and dropped by :func:`scratch_database` on the server of the ``pg_admin_url`` fixture.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa


@contextmanager
def scratch_database(admin_url: str, prefix: str = "hermes_s") -> Iterator[str]:
    """Create an empty database on ``admin_url``'s server, yield its URL, drop it afterwards."""
    admin = sa.make_url(admin_url)
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        engine.dispose()
