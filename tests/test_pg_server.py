"""The test suite's PostgreSQL plumbing (``tests/pg_server.py``, the root conftest).

The README's test command must pass on a machine without PostgreSQL, and start a
throwaway server where only the binaries are installed; these tests pin both paths,
whatever the machine running them has.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pg_server
import pytest
import sqlalchemy as sa
from support import REPO_ROOT, TESTS_DIR, subprocess_env


def environment(**changes: str | None) -> dict[str, str]:
    env = subprocess_env()
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def probe_mode(**changes: str | None) -> str:
    result = subprocess.run(
        [sys.executable, str(TESTS_DIR / "pg_server.py")],
        env=environment(**changes),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.strip()


def test_mode_follows_the_url_then_the_binaries() -> None:
    assert probe_mode(HERMES_TEST_PG_URL="postgresql+psycopg://u@h/db") == "configured"
    assert probe_mode(HERMES_TEST_PG_URL=None, HERMES_TEST_PG_BINDIR="none") == "none"
    assert probe_mode(HERMES_TEST_PG_URL=None, HERMES_TEST_PG_BINDIR=str(REPO_ROOT)) == "none"


def test_without_postgresql_tests_skip_in_one_summary_and_the_gate_says_what_it_left_out(
    tmp_path: Path,
) -> None:
    command = [
        sys.executable, "-m", "pytest", "-n0", "-p", "no:cacheprovider", "-q",
        "--cov=hermes_store", "--cov-report=", "tests/postgres/test_pg_schema.py",
    ]  # fmt: skip
    env = environment(HERMES_TEST_PG_URL=None, HERMES_TEST_REQUIRE_PG=None, HERMES_TEST_PG_BINDIR="none")
    env["COVERAGE_FILE"] = str(tmp_path / ".coverage")
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "skipped, by reason" in result.stdout
    assert "no PostgreSQL: HERMES_TEST_PG_URL is unset" in result.stdout
    assert "SKIPPED [" not in result.stdout, "skips are summarised, not listed one per line"
    note = next(line for line in result.stdout.splitlines() if "coverage gate leaves out" in line)
    assert "*/hermes_store/search/postgres/*" in note


def test_require_pg_turns_a_missing_server_into_failures() -> None:
    command = [sys.executable, "-m", "pytest", "-n0", "-p", "no:cacheprovider", "-q"]
    command.append("tests/postgres/test_pg_schema.py")
    env = environment(HERMES_TEST_PG_URL=None, HERMES_TEST_REQUIRE_PG="1", HERMES_TEST_PG_BINDIR="none")
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "no PostgreSQL" in result.stdout


@pytest.mark.skipif(pg_server.find_pg_ctl() is None, reason="no PostgreSQL server binaries on this machine")
def test_throwaway_server_starts_restarts_and_is_removed() -> None:
    server = pg_server.ThrowawayServer()
    try:
        server.start()
        engine = sa.create_engine(server.url(), poolclass=sa.pool.NullPool)
        with engine.connect() as connection:
            assert connection.exec_driver_sql("SELECT 1").scalar() == 1
        server.stop()
        server.start()
        with engine.connect() as connection:
            assert connection.exec_driver_sql("SELECT 2").scalar() == 2
        engine.dispose()
    finally:
        server.close()
    assert not server.base.exists()
