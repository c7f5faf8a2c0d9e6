"""Maintenance that must run outside any transaction: log truncation and VACUUM."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from hermes_store.backends import backend_for


def vacuum(engine: Engine) -> None:
    """Reclaim space: on SQLite ``PRAGMA wal_checkpoint(TRUNCATE)`` (best effort) then
    ``VACUUM`` (errors propagate); on PostgreSQL ``VACUUM (ANALYZE)`` of the store's tables."""
    backend_for(engine).vacuum(engine)
