"""Kept for modules that import the row helpers from here; see :mod:`hermes_store.execution`."""

from hermes_store.execution import fetch_dicts, fetch_tuples

__all__ = ["fetch_dicts", "fetch_tuples"]
