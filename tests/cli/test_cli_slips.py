"""Small command-line slips, one test each."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from support import REPO_ROOT, subprocess_env

from hermes_store.cli import cli


def run(runner: CliRunner, db: Path, *args: str) -> str:
    result = runner.invoke(cli, ["--db", str(db), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_paging_hint_only_when_a_next_page_exists(runner: CliRunner, seeded_db: Path) -> None:
    total = len(json.loads(run(runner, seeded_db, "sessions", "--json", "-n", "100")))
    assert total >= 2
    exact = run(runner, seeded_db, "sessions", "-n", str(total))
    assert "--page" not in exact and "next" not in exact
    assert len(json.loads(run(runner, seeded_db, "sessions", "--json", "-n", str(total - 1)))) == total - 1
    assert "next page: --page 2" in run(runner, seeded_db, "sessions", "-n", str(total - 1))


def test_search_past_the_last_page_says_so(runner: CliRunner, seeded_db: Path) -> None:
    hits = json.loads(run(runner, seeded_db, "search", "docker", "--json", "-n", "100"))
    assert hits, "the seeded store mentions docker"
    last = run(runner, seeded_db, "search", "docker", "-n", str(len(hits)))
    assert "next" not in last
    beyond = run(runner, seeded_db, "search", "docker", "-n", "1", "-p", str(len(hits) + 3))
    assert f"from result {len(hits) + 3} on" in beyond
    assert not beyond.startswith("No messages match 'docker'.")


def test_no_output_line_ends_in_blanks(runner: CliRunner, seeded_db: Path) -> None:
    commands = (["info"], ["doctor"], ["history"], ["show", "alpha-deploy"], ["search", "docker"], ["stats"])
    for args in commands:
        output = run(runner, seeded_db, *args)
        padded = [line for line in output.splitlines() if line != line.rstrip()]
        assert padded == [], (args, padded[:3])


def test_counts_agree_in_number(runner: CliRunner, seeded_db: Path) -> None:
    output = run(runner, seeded_db, "show", "alpha-deploy")
    assert re.search(r"\b1 tool calls\b", output) is None
    assert re.search(r"\b1 tool call\b", output), output


def test_logged_warnings_print_as_warning_not_upper_case() -> None:
    probe = (
        "import logging\n"
        "from hermes_store.cli import main\n"
        "try:\n    main(['history'])\nexcept SystemExit:\n    pass\n"
        "logging.getLogger('hermes_store.migrations').warning('probe')\n"
    )
    command = [sys.executable, "-c", probe]
    env = subprocess_env()
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=True)
    assert "Warning: probe" in result.stderr
    assert "WARNING" not in result.stderr


def test_readme_points_only_at_files_inside_the_repository() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert "../" not in readme
    for path in re.findall(r"`((?:docs|scripts|benchmarks|tests|migrations)/[\w./-]+)`", readme):
        assert (REPO_ROOT / path.split(" ")[0]).exists(), path
