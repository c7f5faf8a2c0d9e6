"""Shared fixtures of the hermes_store test suite.

Sections (add new fixtures to the section they belong to, or start a new one):

* paths — where things live: the checkout, a fresh database path per test;
* alembic — the real ``alembic`` command line, run in a subprocess;
* pytest-alembic — the ``alembic_config`` / ``alembic_engine`` fixtures its built-in
  tests (``tests/migrations/test_builtin.py``) are driven by.

Legacy upstream databases are built with ``tests/legacy_db.py`` (plain sqlite3).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy.engine import Engine

from hermes_store.engine import create_engine
from hermes_store.migrate import alembic_config as build_alembic_config

if TYPE_CHECKING:
    from alembic.config import Config

TESTS_DIR = Path(__file__).resolve().parent
# Test modules import helpers (support, legacy_db) by plain name, whatever pytest's import mode.
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from support import REPO_ROOT, run_alembic  # noqa: E402

# --- paths -------------------------------------------------------------------------------


@pytest.fixture
def repo_root() -> Path:
    """The checkout's root (holds alembic.ini and pyproject.toml)."""
    return REPO_ROOT


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A not-yet-existing database file in this test's temporary directory."""
    return tmp_path / "state.db"


# --- alembic command line ----------------------------------------------------------------

AlembicCli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def alembic_cli() -> AlembicCli:
    """``alembic_cli(url_or_path, *args, check=True)``: the real alembic command (subprocess)."""
    return run_alembic


# --- pytest-alembic ----------------------------------------------------------------------


@pytest.fixture
def alembic_config() -> Config:
    """The shipped migrations, configured in code exactly as ``hermes_store.migrate`` does."""
    return build_alembic_config()


@pytest.fixture
def alembic_engine(tmp_path: Path) -> Iterator[Engine]:
    """A file-backed SQLite engine built by hermes_store (WAL, foreign keys, 0600 file)."""
    engine = create_engine(tmp_path / "pytest_alembic.db")
    try:
        yield engine
    finally:
        engine.dispose()
