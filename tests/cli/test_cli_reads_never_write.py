"""Reads never write.

Every read command, ``hermes_store.create_engine`` and ``current_revision`` leave a store's
bytes, its journal mode and its sidecar files exactly as they were, on a WAL file and on
a rollback-journal (DELETE) file such as a fresh ``backup``; and nothing but ``SessionDB``,
``upgrade`` and explicit write commands ever creates a file or a folder.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from hermes_store import DatabaseNotFound, SessionDB, create_engine, current_revision
from hermes_store.cli import cli
from hermes_store.models import Session

READ_COMMANDS = [
    ["info"],
    ["info", "--json"],
    ["current"],
    ["current", "--json"],
    ["history"],
    ["sessions"],
    ["sessions", "--json"],
    ["show", "alpha-deploy"],
    ["search", "docker"],
    ["lineage", "beta-refactor"],
    ["stats"],
    ["export"],
    ["doctor"],
]


def snapshot(folder: Path) -> dict[str, str]:
    """Every file in ``folder`` with the SHA-256 of its bytes."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def journal_mode(path: Path) -> str:
    # The header says it without opening a connection: bytes 18-19 are 2 for WAL, 1 for rollback.
    header = path.read_bytes()[:20]
    return "wal" if header[18:20] == b"\x02\x02" else "delete"


@pytest.fixture(params=["wal", "delete"])
def store(request: pytest.FixtureRequest, seeded_db: Path) -> Path:
    """The seeded store, cleanly closed, in WAL or DELETE journal mode."""
    conn = sqlite3.connect(seeded_db)
    conn.execute(f"PRAGMA journal_mode={request.param}")
    conn.close()
    assert journal_mode(seeded_db) == request.param
    return seeded_db


@pytest.mark.parametrize("args", READ_COMMANDS, ids=" ".join)
def test_read_command_leaves_the_store_untouched(runner: CliRunner, store: Path, args: list[str]) -> None:
    before, mode = snapshot(store.parent), journal_mode(store)
    result = runner.invoke(cli, ["--db", str(store), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert snapshot(store.parent) == before
    assert journal_mode(store) == mode


def test_library_reads_leave_the_store_untouched(store: Path) -> None:
    before, mode = snapshot(store.parent), journal_mode(store)
    engine = create_engine(store)
    with sa.orm.Session(engine) as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(Session)) == 8
    engine.dispose()
    assert current_revision(store) == "0020"
    assert snapshot(store.parent) == before
    assert journal_mode(store) == mode


def test_reading_a_store_that_needs_an_upgrade_reports_it_and_leaves_it(
    runner: CliRunner, legacy_v5: Path
) -> None:
    before = snapshot(legacy_v5.parent)
    result = runner.invoke(cli, ["--db", str(legacy_v5), "sessions"])
    assert result.exit_code == 1
    assert "run 'hermes-store upgrade' first" in result.output
    assert snapshot(legacy_v5.parent) == before
    upgraded = runner.invoke(cli, ["--db", str(legacy_v5), "upgrade"])
    assert upgraded.exit_code == 0, upgraded.output
    assert runner.invoke(cli, ["--db", str(legacy_v5), "sessions"]).exit_code == 0


@pytest.mark.parametrize("args", READ_COMMANDS, ids=" ".join)
def test_read_command_on_a_missing_store_creates_nothing(
    runner: CliRunner, tmp_path: Path, args: list[str]
) -> None:
    missing = tmp_path / "no" / "such" / "state.db"
    result = runner.invoke(cli, ["--db", str(missing), *args])
    assert list(tmp_path.iterdir()) == []
    if args[0] in ("current", "history"):
        assert result.exit_code == 0, result.output  # `exists` is one of current's fields
    else:
        assert result.exit_code == 1, result.output


def test_dev_null_is_read_without_leaving_a_journal(runner: CliRunner, tmp_path: Path) -> None:
    null = tmp_path / "null"
    null.touch()  # an empty file is what /dev/null reads as
    result = runner.invoke(cli, ["--db", str(null), "sessions"])
    assert result.exit_code == 1
    assert [p.name for p in tmp_path.iterdir()] == ["null"]
    assert null.read_bytes() == b""


def test_create_engine_on_a_typo_creates_no_file_or_folder(tmp_path: Path) -> None:
    with pytest.raises(DatabaseNotFound, match="nothing was created"):
        create_engine(tmp_path / "path" / "state.db")
    assert list(tmp_path.iterdir()) == []


def test_upgrade_into_a_missing_folder_is_refused(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["--db", str(tmp_path / "no" / "such" / "x.db"), "upgrade"])
    assert result.exit_code == 1
    assert "mkdir" in result.output
    assert list(tmp_path.iterdir()) == []


def test_current_json_on_a_missing_store_says_it_does_not_exist(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["--db", str(tmp_path / "nope.db"), "current", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["exists"] is False
    assert list(tmp_path.iterdir()) == []


def test_sessiondb_still_creates_its_parent_folder(tmp_path: Path) -> None:
    path = tmp_path / "home" / ".hermes" / "state.db"
    SessionDB(path).close()
    assert current_revision(path) == "0020"
