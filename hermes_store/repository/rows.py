"""Kept for modules that import the row helpers from here; see :mod:`hermes_store.db.execution`."""

from hermes_store.db.execution import fetch_dicts, fetch_tuples

__all__ = ["fetch_dicts", "fetch_tuples"]
