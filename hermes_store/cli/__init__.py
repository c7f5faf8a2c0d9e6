"""``hermes-store``: the command line of hermes_store, for operators and analysts.

Operators upgrade, inspect, back up, prune and repair stores; analysts list, read and
search sessions and count tokens and cost. Every command works on the default database,
``--db PATH`` or ``--url URL``. See ``docs/cli.md``.
"""

from __future__ import annotations

from hermes_store.cli.app import cli, main

__all__ = ["cli", "main"]
