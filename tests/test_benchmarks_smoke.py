"""Smoke test of the benchmark suite: ``python -m benchmarks.run --quick`` runs every scenario.

No timing is asserted (CI machines are noisy); the test only proves that every scenario runs on
both sides, that nothing was lost or failed, and that a ratio is reported for each scenario.
Databases are built in a temporary cache directory so the test never reuses a stale cache.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# Scenario labels as they appear in the first column of the result table.
SCENARIO_LABELS = (
    "append",
    "contention",
    "search",
    "listing",
    "conversation",
    "cold start",
    "upgrade v9",
    "size",
)
RATIO = re.compile(r"\s\d+\.\d\dx(\s|$)")


def test_quick_benchmark_runs_every_scenario(tmp_path: Path) -> None:
    markdown = tmp_path / "benchmarks.md"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.run",
            "--quick",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--markdown",
            str(markdown),
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # two store sizes now, on a shared machine
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]

    table = proc.stdout.split("\nscenario ", 1)[1]
    for label in SCENARIO_LABELS:
        rows = [line for line in table.splitlines() if line.startswith(label + " ")]
        assert rows, f"no result row for scenario {label!r}:\n{table}"
        assert any(RATIO.search(row) for row in rows), f"no ratio for scenario {label!r}:\n{rows}"

    # hermes_store must never lose an acknowledged message or raise under contention.
    counts = re.findall(r"^contention\s+\d+ writers: (?:lost messages|errors)\s+(\d+)\s+(\d+)\s", table, re.M)
    assert len(counts) == 4, table
    assert all(store == "0" for _baseline, store in counts), counts

    text = markdown.read_text(encoding="utf-8")
    assert "| scenario | figure |" in text
    assert "python -m benchmarks.run --quick" in text


def _run_benchmark(module: str, arguments: list[str], timeout: int) -> subprocess.CompletedProcess[str]:
    """``python -m benchmarks.<module> <arguments>`` from the repository root; it must succeed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *arguments],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def test_new_store_benchmark_reports_every_side(tmp_path: Path) -> None:
    proc = _run_benchmark("bench_new_store", ["--rounds", "1", "--files", "2"], timeout=300)
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.endswith("ms") or "×)" in line}
    assert {"sqlite3", "hermes_store"} <= set(rows), proc.stdout
    assert "load average before" in proc.stdout


@pytest.mark.postgres
@pytest.mark.slow
def test_pg_scale_benchmark_times_chosen_kinds_on_a_small_store(pg_admin_url: str, tmp_path: Path) -> None:
    """``bench_pg_scale`` builds a store with COPY, times the kinds asked for and drops it."""
    arguments = ["--pg-url", pg_admin_url, "--sessions", "40", "--sqlite-messages", "300", "--rounds", "1"]
    arguments += ["--kinds", "phrase,word", "--skip-copy", "--cache", str(tmp_path)]
    proc = _run_benchmark("bench_pg_scale", arguments, timeout=600)
    figures = [line.split("|")[1].strip() for line in proc.stdout.splitlines() if line.startswith("| search")]
    assert figures == ["search word", "search phrase"], proc.stdout
    assert "timing at load average" in proc.stdout and "rebuilt idx_messages_word_pairs_bucket" in proc.stdout


def test_search_against_upstream_reports_every_kind_on_every_side(tmp_path: Path) -> None:
    """``bench_search_upstream`` times each search kind on upstream, sqlite3 and the store."""
    from benchmarks.bench_search_upstream import search_kinds
    from benchmarks.upstream import MIRROR

    proc = _run_benchmark(
        "bench_search_upstream", ["--sessions", "10", "--rounds", "1", "--cache", str(tmp_path)], timeout=300
    )
    rows = {line.split("|")[1].strip(): line for line in proc.stdout.splitlines() if line.startswith("| ")}
    assert set(search_kinds(42)) <= set(rows), proc.stdout
    for kind in search_kinds(42):
        cells = [cell.strip() for cell in rows[kind].split("|")[2:-1]]
        assert cells[1] != "-" and cells[2] != "-", rows[kind]  # sqlite3 and hermes_store always run
        if MIRROR.exists():
            assert cells[0] != "-" and cells[3].endswith("×"), rows[kind]
    assert "load average before" in proc.stdout and "load average after" in proc.stdout
