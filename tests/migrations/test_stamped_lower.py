"""A file at head that another program stamped with a lower ``schema_version``.

Upstream Hermes never writes its version lower, but a tool or an older program may; upstream
would then run its version-gated data fixes on the next open. Opening such a file with this
store runs the revision that set the version again: it tags the delegate sub-agents the
version-16 fix tags, and writes schema_version 17 back.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from hermes_store import SessionDB


def _version(path: Path) -> tuple[int, str]:
    with closing(sqlite3.connect(path)) as connection:
        version = connection.execute("SELECT version FROM schema_version").fetchone()[0]
        revision = connection.execute("SELECT version_num FROM alembic_version").fetchone()[0]
    return int(version), str(revision)


def test_a_lower_schema_version_is_raised_and_its_fixes_run(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        db.create_session("parent", "cli")
        db.create_session("delegate", "cli", parent_session_id="parent")
        db.create_session("continuation", "cli", parent_session_id="parent")
    head = _version(path)
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("UPDATE schema_version SET version = 15")
        connection.execute("UPDATE sessions SET model_config = NULL")
        connection.commit()
    with SessionDB(path) as db:
        tagged = db.get_session("delegate")
        assert tagged is not None and json.loads(tagged["model_config"]) == {"_delegate_from": "parent"}
        assert db.delete_session("parent") is True
        assert db.get_session("delegate") is None  # a delegate goes with its parent
    assert _version(path) == head == (17, head[1])

