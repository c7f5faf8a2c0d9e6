"""Smoke test of ``benchmarks.bench_targets``: every workload runs on every side, nothing lost.

No timing is asserted. Upstream Hermes runs from the mirror when it is there (the column is
skipped with a message otherwise); the check is that each row of the table is reported and
that every acknowledged append was found, once, with exact counters.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import bench_upstream

REPO_ROOT = Path(__file__).resolve().parent.parent
MIRROR = bench_upstream().MIRROR

ROWS = (
    "1 thread",
    "8 threads, one store",
    "200 tasks, one AsyncSessionDB",
    "4 processes, one file",
    "8 processes, one file",
    "turns of 4, one call each",
    "turns of 4, append_messages",
)


@pytest.mark.slow  # forks 24 writer processes and opens 20 stores
def test_every_target_workload_runs_and_loses_nothing() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_targets", "--rounds", "1", "--appends", "16"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {line.split("|")[1].strip(): line for line in result.stdout.splitlines() if line.startswith("| ")}
    assert set(ROWS) <= rows.keys(), result.stdout
    assert "lost: 0, duplicated: 0, sessions with wrong counters: 0." in result.stdout
    upstream_figure = rows["8 threads, one store"].split("|")[2].strip()
    assert (upstream_figure != "—") == MIRROR.exists(), result.stderr
