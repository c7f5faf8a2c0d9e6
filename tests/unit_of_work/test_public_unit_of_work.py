"""The public unit of work as the README documents it, and the CLI's use of public API only."""

from __future__ import annotations

import os
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import orm
from support import REPO_ROOT

from hermes_store import SessionDB
from hermes_store.repository import messages, sessions


def readme_block(heading: str) -> str:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(heading, 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, f"no python block under {heading}"
    return match.group(1)


def test_the_readme_example_runs_and_commits_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(readme_block("### Composing writes"), "README.md", "exec"), {})
    with closing(sqlite3.connect(tmp_path / "state.db")) as conn:
        assert conn.execute("SELECT id, message_count FROM sessions").fetchall() == [("sess_2", 1)]
        assert conn.execute("SELECT value FROM state_meta WHERE key = 'last_session'").fetchone() == (
            "sess_2",
        )


def test_a_composed_write_that_fails_leaves_nothing(db_path: Path) -> None:
    db = SessionDB(db_path)

    def half_then_fail(s: orm.Session) -> None:
        sessions.insert_session(s, "s", "cli")
        messages.append(s, "s", messages.NewMessage(role="user", content="first"))
        raise RuntimeError("the service changed its mind")

    with pytest.raises(RuntimeError, match="changed its mind"):
        db.unit_of_work.write(half_then_fail, "a composed write")
    assert db.get_session("s") is None and db.message_count() == 0
    db.close()
    with pytest.raises(RuntimeError, match="closed"):
        _ = db.unit_of_work


def cli_lines_matching(pattern: str) -> list[str]:
    cli = REPO_ROOT / "hermes_store" / "cli"
    found = re.compile(pattern)
    return [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(cli.glob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if found.search(line)
    ]


def test_the_cli_uses_no_private_sessiondb_attribute() -> None:
    found = cli_lines_matching(r"\bdb\._[a-z]")
    assert found == [], os.linesep.join(found)


def test_the_cli_runs_no_sql_of_its_own() -> None:
    # Its queries live in hermes_store.repository (and .doctor, .backup); the CLI prints.
    found = cli_lines_matching(r"exec_driver_sql|(?<![.\w])(?:select|insert|update|delete|text)\(|PRAGMA")
    assert found == [], os.linesep.join(found)
