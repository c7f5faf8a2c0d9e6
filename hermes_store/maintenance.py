"""Maintenance that must run outside any transaction: WAL truncation and VACUUM."""

from __future__ import annotations

import logging

from sqlalchemy.engine import Engine

log = logging.getLogger(__name__)


def vacuum(engine: Engine) -> None:
    """``PRAGMA wal_checkpoint(TRUNCATE)`` (best effort), then ``VACUUM`` (errors propagate).

    Runs on a raw connection in autocommit mode because VACUUM cannot run inside a
    transaction. On PostgreSQL it runs ``VACUUM (ANALYZE)`` on the store's tables.
    """
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        if engine.dialect.name == "sqlite":
            try:
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except Exception as exc:
                log.debug("WAL truncate skipped: %s", exc)
            cursor.execute("VACUUM")
        else:
            # The DB-API connection, not the driver's: SQLAlchemy's adapted async
            # connection offers the same synchronous autocommit switch.
            driver = raw.dbapi_connection
            previous = getattr(driver, "autocommit", None)
            driver.autocommit = True  # type: ignore[union-attr]
            try:
                cursor.execute("VACUUM (ANALYZE) sessions, messages")
            finally:
                driver.autocommit = previous  # type: ignore[union-attr]
        cursor.close()
    finally:
        raw.close()
