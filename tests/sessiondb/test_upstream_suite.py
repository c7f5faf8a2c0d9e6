"""Hermes Agent's own test file for ``hermes_state`` passes on this store, whole.

``tests/test_hermes_state.py`` at the pinned upstream commit is read from the Hermes mirror
(never copied into this repository) into a temporary folder and run there by pytest in a
child process, where ``import hermes_state`` finds this package's drop-in. Every one of
its tests must pass: it is how Hermes itself checks the store it runs on. Without the
mirror the test skips, saying so.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import bench_upstream, subprocess_env

UPSTREAM_TESTS = "tests/test_hermes_state.py"


def _upstream_test_file(folder: Path) -> Path:
    source = bench_upstream().upstream_file(UPSTREAM_TESTS)
    if source is None:
        pytest.skip(f"upstream's {UPSTREAM_TESTS} cannot be read from the Hermes mirror (reason on stderr)")
    target = folder / "test_hermes_state.py"
    target.write_text(source, encoding="utf-8")
    return target


@pytest.mark.slow  # about 200 upstream tests in a child pytest: 8-10 s
def test_upstream_hermes_state_tests_pass_on_the_drop_in(tmp_path: Path) -> None:
    test_file = _upstream_test_file(tmp_path)
    home = tmp_path / "hermes_home"
    home.mkdir()
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(test_file),
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-p",
            "no:randomly",
            # Upstream's file runs under its own defaults, not this project's settings.
            "-c",
            str(tmp_path / "pytest.ini"),
            "--rootdir",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=subprocess_env(HERMES_HOME=str(home)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
