"""The package works when Python runs from the checkout's root.

There the source folder ``hermes_store/`` shadows the installed package and has no
``migrations`` subpackage: the Alembic scripts must still be found (top-level
``migrations/``), so creating and upgrading a store works as it does once installed.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from support import REPO_ROOT, subprocess_env

PROBE = """
import json, sys
import hermes_store
from hermes_store import SessionDB
SessionDB(sys.argv[1]).close()
print(json.dumps({"package": hermes_store.__file__}))
"""


# "installed": the test environment as it is (the README's editable install);
# "not installed": site processing off (-S), so no .pth file maps hermes_store anywhere,
# with only the dependencies' folder on the path.
SETUPS = {
    "installed": ([], "."),
    "not installed": (["-S"], f".:{sysconfig.get_paths()['purelib']}"),
}


@pytest.fixture(params=sorted(SETUPS))
def setup(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def run_from_checkout(setup: str, *args: str) -> subprocess.CompletedProcess[str]:
    flags, pythonpath = SETUPS[setup]
    return subprocess.run(
        [sys.executable, *flags, *args],
        cwd=REPO_ROOT,
        env=subprocess_env(PYTHONPATH=pythonpath),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def head_of(path: Path) -> tuple[object, object]:
    with sqlite3.connect(path) as conn:
        revision = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        version = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return revision[0], version[0]


def test_sessiondb_creates_a_store_when_python_runs_from_the_checkout_root(
    setup: str, tmp_path: Path
) -> None:
    database = tmp_path / "f.db"
    result = run_from_checkout(setup, "-c", PROBE, str(database))
    assert result.returncode == 0, result.stderr
    package = Path(json.loads(result.stdout.strip().splitlines()[-1])["package"])
    assert package.is_relative_to(REPO_ROOT / "hermes_store"), "the source tree must be what ran"
    assert head_of(database) == ("0020", 17)


def test_cli_module_upgrades_from_the_checkout_root(setup: str, tmp_path: Path) -> None:
    database = tmp_path / "f.db"
    result = run_from_checkout(setup, "-m", "hermes_store.cli", "--db", str(database), "upgrade")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert head_of(database) == ("0020", 17)
