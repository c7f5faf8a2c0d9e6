"""Plain helpers shared by test modules (import them: ``from support import …``).

Fixtures live in ``conftest.py``; this module holds ordinary functions and constants so
that test modules never import a ``conftest`` by name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
TESTS_DIR = REPO_ROOT / "tests"


def sqlite_url(target: str | os.PathLike[str]) -> str:
    """A SQLAlchemy URL for ``target``: a path becomes ``sqlite:///<absolute path>``."""
    text = os.fspath(target)
    if "://" in text:
        return text
    return f"sqlite:///{Path(text).resolve()}"


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for child processes: no inherited store location settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("HERMES_STORE_URL", "HERMES_HOME")}
    env.update(extra)
    return env


def run_alembic(
    url: str | os.PathLike[str], *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m alembic -x url=<url> <args>`` from the checkout, as a deploy would.

    With ``check`` (the default) a non-zero exit fails the test, showing alembic's output.
    """
    command = [sys.executable, "-m", "alembic", "-x", f"url={sqlite_url(url)}", *args]
    result = subprocess.run(
        command, cwd=REPO_ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=120
    )
    if check and result.returncode != 0:
        pytest.fail(
            f"{' '.join(args)} exited {result.returncode}\n"
            f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )
    return result
