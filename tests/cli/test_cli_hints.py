"""Every hint in an error names a command that works in that situation.

Each test follows the advice it is given and checks that it leads somewhere.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from hermes_store.cli import cli


def hinted_commands(text: str) -> list[str]:
    """The ``hermes-store …`` commands a message recommends."""
    return re.findall(r"'hermes-store ([a-z-]+)[^']*'", text)


def test_not_a_database_never_sends_the_user_to_doctor(runner: CliRunner, tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    for command in (["sessions"], ["info"], ["doctor"]):
        result = runner.invoke(cli, ["--db", str(junk), *command])
        assert result.exit_code == 1, result.output
        assert "not a SQLite database" in result.output
        assert hinted_commands(result.output) == [], result.output


def test_newer_schema_is_not_sent_to_upgrade(runner: CliRunner, seeded_db: Path) -> None:
    with sqlite3.connect(seeded_db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0099'")
    result = runner.invoke(cli, ["--db", str(seeded_db), "doctor"])
    assert "upgrade" not in hinted_commands(result.output), result.output
    assert "pip install -U hermes-store" in result.output
    # and indeed: upgrade leaves a newer schema as it is
    assert "left as it is" in runner.invoke(cli, ["--db", str(seeded_db), "upgrade"]).output


def test_missing_database_hint_creates_one(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    result = runner.invoke(cli, ["--db", str(path), "sessions"])
    assert result.exit_code == 1
    assert hinted_commands(result.output)[0] == "upgrade"
    assert runner.invoke(cli, ["--db", str(path), "upgrade"]).exit_code == 0
    assert runner.invoke(cli, ["--db", str(path), "sessions"]).exit_code == 0


def test_doctor_on_an_empty_file_hint_creates_the_schema(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    sqlite3.connect(path).close()
    path.write_bytes(b"")
    result = runner.invoke(cli, ["--db", str(path), "doctor"])
    assert "upgrade" in hinted_commands(result.output), result.output
    assert runner.invoke(cli, ["--db", str(path), "upgrade"]).exit_code == 0
    assert runner.invoke(cli, ["--db", str(path), "doctor"]).exit_code == 0
