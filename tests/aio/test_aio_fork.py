"""A fork beside a live PostgreSQL ``AsyncSessionDB`` pauses every store's writes.

Before a fork each unit of work of the process waits for its write in progress (see
``hermes_store.uow.fork_safety``). The asyncio store's unit of work must take part without
raising, and must not keep the stores registered after it from pausing: a child forked
during a SQLite write would otherwise inherit that write's in-process lock state and its
first append would wait for a lock nobody releases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / "_fork_beside_async_store.py"

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork() is POSIX only")


@needs_fork
def test_a_child_forked_during_a_sqlite_write_beside_an_async_pg_store_appends(
    aio_pg_url: str, tmp_path: Path
) -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), aio_pg_url, str(tmp_path / "state.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {"child": 0}, run.stderr
    assert "Exception ignored" not in run.stderr, run.stderr
