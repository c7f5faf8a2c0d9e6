"""FTS upkeep on the store: merging the SQLite full-text indexes, and ``VACUUM``.

Also the FTS probes upstream Hermes' code and tests read on a ``SessionDB``
(``_fts_enabled``, ``_trigram_available``, ``_fts_table_exists``…).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from typing import ClassVar, Protocol, cast

from sqlalchemy.engine import Engine

from hermes_store.api.features.base import FacadeBase
from hermes_store.repository import fts_maintenance, maintenance

log = logging.getLogger(__name__)

READ_ONLY_ERROR = "attempt to write a readonly database"
"""What a write on a read-only store raises (as ``sqlite3.OperationalError``, as SQLite does)."""


class FtsMaintenanceMethods(FacadeBase):
    """``optimize_fts()``, ``vacuum()`` and the FTS probes."""

    _ASYNC_READS: ClassVar[tuple[str, ...]] = ()
    _ASYNC_WRITES: ClassVar[tuple[str, ...]] = ("optimize_fts", "vacuum")

    _OPTIMIZE_EVERY_N_WRITES: ClassVar[int] = 1000
    """Upstream Hermes' cadence of automatic segment merges, in writes; Hermes' drop-in
    (``hermes_state.SessionDB``) merges on it, this store's own face merges when asked
    (:meth:`optimize_fts`, :meth:`vacuum`)."""

    def optimize_fts(self) -> int:
        """Merge each SQLite FTS5 index into a single segment; returns how many were merged.

        Search results do not change, only how fast they are found. An index that does
        not exist is skipped, and one that cannot be merged now is skipped with a warning.
        PostgreSQL's indexes need no merging: 0.
        """
        return self._write(fts_maintenance.optimize, "merging the full-text index segments")

    def vacuum(self) -> int:
        """Merge the FTS segments (:meth:`optimize_fts`), then checkpoint the WAL and
        ``VACUUM`` the file (on PostgreSQL ``VACUUM (ANALYZE)`` of the store's tables).

        Returns how many FTS indexes were merged. A failed merge is logged and the vacuum
        still runs; a failed ``VACUUM`` raises.
        """
        self._check_open()
        if getattr(self, "read_only", False):
            raise sqlite3.OperationalError(READ_ONLY_ERROR)
        merged = 0
        try:
            merged = self.optimize_fts()
        except Exception as exc:  # the merge is an optimisation: the vacuum still runs
            log.warning("merging the FTS segments before VACUUM failed: %s", exc)
        store = cast(_EngineOwner, self)
        with store._lock:
            maintenance.vacuum(store.engine)
        return merged

    # --- FTS probes upstream Hermes reads --------------------------------------------

    @property
    def _fts_enabled(self) -> bool:
        """Whether full-text search works on this store (on SQLite: ``messages_fts`` is readable)."""
        return self._fts_available("messages_fts")

    @property
    def _trigram_available(self) -> bool:
        """Whether substring (trigram) search has its index (on SQLite: ``messages_fts_trigram``)."""
        return self._fts_available("messages_fts_trigram")

    def _fts_table_exists(self, name: str) -> bool:
        """Whether SQLite table ``name`` exists and can be read (False on PostgreSQL)."""
        return self._query(lambda db: fts_maintenance.fts_table_exists(db, name))

    def _fts_available(self, table: str) -> bool:
        if cast(_EngineOwner, self).engine.dialect.name != "sqlite":
            return True  # PostgreSQL searches with its own indexes, always present
        return self._fts_table_exists(table)

    @staticmethod
    def _is_fts5_unavailable_error(exc: BaseException) -> bool:
        """Whether ``exc`` says this SQLite has no FTS5, or no trigram tokenizer."""
        text = str(exc).lower()
        return ("no such module" in text and "fts5" in text) or "no such tokenizer: trigram" in text

    @staticmethod
    def _is_trigram_unavailable_error(exc: BaseException) -> bool:
        """Whether ``exc`` says only the trigram tokenizer is missing (FTS5 itself works)."""
        return "no such tokenizer: trigram" in str(exc).lower()


class _EngineOwner(Protocol):
    """What the methods here use of the store they are mixed into, beyond FacadeBase."""

    engine: Engine

    @property
    def _lock(self) -> threading.Lock: ...
