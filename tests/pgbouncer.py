"""The tests' PgBouncer (:mod:`benchmarks.pgbouncer`): skipped with the reason where it cannot run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from benchmarks import pgbouncer


@contextmanager
def transaction_pooler(
    server_url: str, folder: Path, *, pool_size: int = 2, ignore_options: bool = False
) -> Iterator[str]:
    """PgBouncer in transaction mode in front of ``server_url``; yields its URL, or skips."""
    missing = pgbouncer.unavailable()
    if missing is not None:
        pytest.skip(missing)
    with pgbouncer.transaction_pooler(
        server_url, folder, pool_size=pool_size, ignore_options=ignore_options
    ) as url:
        yield url
