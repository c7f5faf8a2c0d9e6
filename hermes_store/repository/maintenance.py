"""Maintenance: VACUUM (outside any transaction) and the auto-prune policy."""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Protocol

from sqlalchemy.engine import Engine

from hermes_store.db.backends import backend_for

log = logging.getLogger(__name__)
LAST_AUTO_PRUNE_KEY = "last_auto_prune"


def vacuum(engine: Engine) -> None:
    """Reclaim space: on SQLite ``PRAGMA wal_checkpoint(TRUNCATE)`` (best effort) then
    ``VACUUM`` (errors propagate); on PostgreSQL ``VACUUM (ANALYZE)`` of the store's tables."""
    backend_for(engine).vacuum(engine)


class _Store(Protocol):
    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str | None) -> None: ...
    def vacuum(self) -> object: ...
    def prune_sessions(
        self,
        older_than_days: float = ...,
        source: str | None = ...,
        sessions_dir: str | os.PathLike[str] | None = ...,
    ) -> int: ...


def auto_prune_and_vacuum(
    store: _Store,
    retention_days: float,
    min_interval_hours: float,
    *,
    vacuum: bool,
    sessions_dir: str | os.PathLike[str] | None,
) -> dict[str, Any]:
    """Prune (and vacuum if anything went) at most once per ``min_interval_hours``; never raises.

    The time of the last run is kept in ``state_meta`` under ``last_auto_prune``.
    Returns ``{"skipped", "pruned", "vacuumed"}`` plus ``"error"`` on failure.
    """
    outcome: dict[str, Any] = {"skipped": False, "pruned": 0, "vacuumed": False}
    try:
        last = store.get_meta(LAST_AUTO_PRUNE_KEY)
        try:
            last_run = float(last) if last is not None else None
        except ValueError:
            last_run = None
        if last_run is not None and time.time() - last_run < min_interval_hours * 3600:
            outcome["skipped"] = True
            return outcome
        outcome["pruned"] = store.prune_sessions(retention_days, sessions_dir=sessions_dir)
        if vacuum and outcome["pruned"] > 0:
            try:
                store.vacuum()
                outcome["vacuumed"] = True
            except Exception as exc:
                log.warning("auto-vacuum failed: %s", exc)
        store.set_meta(LAST_AUTO_PRUNE_KEY, str(time.time()))
    except Exception as exc:
        log.warning("auto-prune failed: %s", exc)
        outcome["error"] = str(exc)
    return outcome
