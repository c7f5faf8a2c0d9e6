"""Fixtures of the ``hermes-store`` command tests: a seeded store and a runner.

The store is built once per test session through :class:`SessionDB` (so it holds
exactly what the library writes), its timestamps moved to fixed offsets from "now", and
copied for each test with SQLite's backup API.

Seeded sessions (ids are stable):

========================  =========  ========================================================
id                        source     what it exercises
========================  =========  ========================================================
``alpha-deploy``          cli        tool call + tool output + reasoning; ended ``user_exit``
``alpha-deploy-sub``      cli        delegate child of ``alpha-deploy``
``beta-refactor``         cli        compression root (ended ``compression``)
``beta-refactor-2``       cli        its continuation; mentions 记忆断裂
``gamma-photo``           telegram   multimodal first message; live; actual cost
``epsilon-plan``          cli        ended ``branched``
``epsilon-plan-b``        cli        its branch
``zeta-ancient``          tui        200 days old, ended (pruned by ``--older-than 90``)
========================  =========  ========================================================
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from hermes_store.api.session_db import SessionDB
from hermes_store.cli import cli

DAY = 86400.0
TOOL_OUTPUT = "\n".join(f"container {n}: started" for n in range(1, 21))
TOOL_CALLS = [
    {
        "id": "call_1",
        "type": "function",
        "function": {"name": "terminal", "arguments": '{"command": "docker compose up -d"}'},
    }
]


def _seed(db: SessionDB) -> dict[str, tuple[float, float | None]]:
    """Write the seeded sessions; returns each session's (started_at, ended_at) to apply."""
    now = time.time()
    times: dict[str, tuple[float, float | None]] = {}

    db.create_session("alpha-deploy", "cli", model="claude-sonnet-4")
    db.set_session_title("alpha-deploy", "Deploy pipeline")
    db.append_message("alpha-deploy", "user", "How do I deploy the pipeline with docker-compose?")
    db.append_message(
        "alpha-deploy",
        "assistant",
        "Let me start the containers.",
        tool_calls=TOOL_CALLS,
        reasoning="The user wants a deployment; docker compose is the tool.",
        finish_reason="tool_calls",
    )
    db.append_message("alpha-deploy", "tool", TOOL_OUTPUT, tool_name="terminal", tool_call_id="call_1")
    db.create_session("alpha-deploy-sub", "cli", model="claude-haiku", parent_session_id="alpha-deploy")
    db.append_message("alpha-deploy-sub", "user", "Search the docs for deploy flags")
    db.append_message("alpha-deploy-sub", "assistant", "Found --detach and --build.")
    db.append_message(
        "alpha-deploy", "assistant", "The pipeline is deployed and healthy.", finish_reason="stop"
    )
    db.update_token_counts("alpha-deploy", 1200, 300, estimated_cost_usd=0.012, api_call_count=2)
    db.update_token_counts("alpha-deploy-sub", 400, 80, estimated_cost_usd=0.001)
    db.end_session("alpha-deploy-sub", "user_exit")
    db.end_session("alpha-deploy", "user_exit")
    times["alpha-deploy"] = (now - 2 * DAY, now - 2 * DAY + 3600)
    times["alpha-deploy-sub"] = (now - 2 * DAY + 600, now - 2 * DAY + 900)

    db.create_session("beta-refactor", "cli", model="gpt-5")
    db.set_session_title("beta-refactor", "Refactor search")
    db.append_message("beta-refactor", "user", "Refactor the search module to use the trigram index")
    db.append_message("beta-refactor", "assistant", "Sure, starting with the sanitizer.")
    db.update_token_counts("beta-refactor", 5000, 800, estimated_cost_usd=0.05)
    db.end_session("beta-refactor", "compression")
    db.create_session("beta-refactor-2", "cli", model="gpt-5", parent_session_id="beta-refactor")
    db.set_session_title("beta-refactor-2", "Refactor search #2")
    db.append_message("beta-refactor-2", "user", "Continue the refactor")
    db.append_message("beta-refactor-2", "assistant", "Done: trigram search now finds 记忆断裂 in messages.")
    db.update_token_counts("beta-refactor-2", 3000, 500, estimated_cost_usd=0.03)
    times["beta-refactor"] = (now - 5 * DAY, now - 5 * DAY + 1800)
    times["beta-refactor-2"] = (now - 5 * DAY + 1800, None)

    db.create_session("gamma-photo", "telegram", model="gpt-5")
    db.append_message(
        "gamma-photo",
        "user",
        [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
    )
    db.append_message("gamma-photo", "assistant", "A cat sitting on a keyboard.")
    db.update_token_counts("gamma-photo", 800, 100, estimated_cost_usd=0.004, actual_cost_usd=0.005)
    times["gamma-photo"] = (now - 1 * DAY, None)

    db.create_session("epsilon-plan", "cli", model="claude-sonnet-4")
    db.set_session_title("epsilon-plan", "Holiday plan")
    db.append_message("epsilon-plan", "user", "Plan a trip to Kyoto in spring")
    db.append_message("epsilon-plan", "assistant", "Day one: Fushimi Inari at dawn.")
    db.end_session("epsilon-plan", "branched")
    db.create_session("epsilon-plan-b", "cli", model="claude-sonnet-4", parent_session_id="epsilon-plan")
    db.append_message("epsilon-plan-b", "user", "What about autumn instead?")
    db.update_token_counts("epsilon-plan", 600, 200, estimated_cost_usd=0.006)
    times["epsilon-plan"] = (now - 3 * DAY, now - 3 * DAY + 600)
    times["epsilon-plan-b"] = (now - 3 * DAY + 700, None)

    db.create_session("zeta-ancient", "tui", model="gpt-4")
    db.set_session_title("zeta-ancient", "Ancient history")
    db.append_message("zeta-ancient", "user", "An old question about pruning")
    db.append_message("zeta-ancient", "assistant", "An old answer.")
    db.update_token_counts("zeta-ancient", 100, 50, estimated_cost_usd=0.002)
    db.end_session("zeta-ancient", "user_exit")
    times["zeta-ancient"] = (now - 200 * DAY, now - 200 * DAY + 60)
    return times


def _apply_times(path: Path, times: dict[str, tuple[float, float | None]]) -> None:
    connection = sqlite3.connect(path)
    try:
        with connection:
            for session_id, (started, ended) in times.items():
                connection.execute(
                    "UPDATE sessions SET started_at = ?, ended_at = ? WHERE id = ?",
                    (started, ended, session_id),
                )
                ids = [
                    row[0]
                    for row in connection.execute(
                        "SELECT id FROM messages WHERE session_id = ? ORDER BY id", (session_id,)
                    )
                ]
                for offset, message_id in enumerate(ids, start=1):
                    connection.execute(
                        "UPDATE messages SET timestamp = ? WHERE id = ?",
                        (started + 10.0 * offset, message_id),
                    )
    finally:
        connection.close()


def build_seeded_store(path: Path) -> Path:
    """Create the seeded store at ``path`` (see the module docstring)."""
    db = SessionDB(path)
    try:
        times = _seed(db)
    finally:
        db.close()
    _apply_times(path, times)
    return path


def copy_store(source: Path, destination: Path) -> Path:
    """A consistent copy of a SQLite store (backup API)."""
    src = sqlite3.connect(source)
    dst = sqlite3.connect(destination)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()
    return destination


@pytest.fixture(scope="session")
def seeded_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seeded store, built once per test session. Do not modify it."""
    return build_seeded_store(tmp_path_factory.mktemp("template") / "seeded.db")


@pytest.fixture
def seeded_db(seeded_template: Path, tmp_path: Path) -> Path:
    """A private copy of the seeded store for one test."""
    return copy_store(seeded_template, tmp_path / "state.db")


@pytest.fixture
def legacy_v5(tmp_path: Path) -> Path:
    """An upstream (pre-Alembic) database at schema version 5 holding a few rows."""
    from legacy_db import build_legacy_db, populate

    path = tmp_path / "legacy.db"
    build_legacy_db(path, 5)
    populate(path)
    return path


@pytest.fixture
def runner() -> CliRunner:
    """A click runner with no inherited store settings."""
    return CliRunner(env={"HERMES_STORE_URL": None, "HERMES_HOME": None, "NO_COLOR": None, "COLUMNS": "120"})


Invoke = Callable[..., Result]


@pytest.fixture
def invoke(runner: CliRunner, seeded_db: Path) -> Invoke:
    """Run ``hermes-store --db <seeded copy> ARGS…`` in-process; checks the exit status.

    ``db=`` points at another file; ``raw=True`` passes no ``--db`` at all.
    """

    def run(*args: str, status: int = 0, db: Path | None = None, raw: bool = False, **kwargs: Any) -> Result:
        prefix = [] if raw else ["--db", str(db or seeded_db)]
        result = runner.invoke(cli, [*prefix, *args], catch_exceptions=False, **kwargs)
        assert result.exit_code == status, (result.exit_code, result.output)
        return result

    return run


@pytest.fixture
def hermes_store_proc() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the installed ``hermes-store`` in a child process (end-to-end)."""
    return run_subprocess


def hermes_store_command() -> list[str]:
    """The installed console script, or ``python -m hermes_store.cli`` without one."""
    script = Path(sys.executable).with_name("hermes-store")
    return [str(script)] if script.exists() else [sys.executable, "-m", "hermes_store.cli"]


def run_subprocess(*args: str, check: bool = True, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run the real ``hermes-store`` in a child process."""
    # COLUMNS too: a test earlier in the same worker process may have left one set, and
    # the child must see the pipe width, as a user piping its output would.
    unset = ("HERMES_STORE_URL", "HERMES_HOME", "COLUMNS")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(kwargs.pop("env", {}))
    result = subprocess.run(
        [*hermes_store_command(), *args], capture_output=True, text=True, env=env, timeout=60, **kwargs
    )
    if check:
        assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return result
