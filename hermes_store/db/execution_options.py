"""The execution options hermes_store sets on its own connections."""

from __future__ import annotations

NO_BEGIN_OPTION = "hermes_store_no_begin"
"""Execution option: leave SQLite in autocommit mode (for VACUUM and checkpoints); the
SQLite engine's ``begin`` hook (:mod:`hermes_store.db.engine`) then emits no ``BEGIN``."""
