"""Fixtures of the asyncio tests: other processes, and a fresh store per test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from aio_support import Processes  # noqa: E402

from hermes_store import SessionDB  # noqa: E402


@pytest.fixture
def processes() -> Iterator[Processes]:
    """Start worker processes; they are reaped after the test."""
    group = Processes()
    try:
        yield group
    finally:
        for process in group.started:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)
            if process.stdout is not None:
                process.stdout.close()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A freshly created SQLite store (schema at head) in ``tmp_path``."""
    path = tmp_path / "state.db"
    SessionDB(path).close()
    return path
