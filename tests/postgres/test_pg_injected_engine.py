"""On PostgreSQL, a caller's engine is used as it is and never disposed."""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy as sa

from hermes_store import SessionDB


def test_an_injected_postgresql_engine_keeps_its_pool(pg_url: str) -> None:
    engine = sa.create_engine(pg_url)
    pool = engine.pool
    db = SessionDB(engine=engine)
    db.create_session("s", "cli")
    with pytest.raises(psycopg.IntegrityError):
        db.append_message("missing", "user", "orphan")  # the foreign key holds
    db.close()
    assert engine.pool is pool
    with engine.connect() as connection:
        assert connection.exec_driver_sql("SELECT COUNT(*) FROM sessions").scalar() == 1
    engine.dispose()
