"""``upgrade``, ``downgrade``, ``current`` and ``history`` (Alembic with the legacy shim)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

from click.testing import Result

from hermes_store.api.session_db import SessionDB

Invoke = Callable[..., Result]


def _versions(path: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    connection = sqlite3.connect(path)
    try:
        return (
            connection.execute("SELECT version_num FROM alembic_version").fetchall(),
            connection.execute("SELECT version FROM schema_version").fetchall(),
        )
    finally:
        connection.close()


def test_upgrade_creates_a_store_and_is_idempotent(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    first = invoke("upgrade", db=path)
    assert "Created" in first.output
    assert "empty (no schema) → 0020 (head) (the schema of the whole history, in one step)" in first.output
    assert _versions(path) == ([("0020",)], [(17,)])
    assert "already at 0020 (head); nothing to do" in invoke("upgrade", db=path).output


def test_upgrade_of_a_new_file_to_an_older_revision_runs_the_scripts(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "stepped.db"
    assert "empty (no schema) → 0011 (11 revisions applied)" in invoke("upgrade", "0011", db=path).output
    assert "0011 → 0020 (head) (9 revisions applied)" in invoke("upgrade", db=path).output
    assert _versions(path) == ([("0020",)], [(17,)])


def test_downgrade_and_upgrade_keep_rows(invoke: Invoke, seeded_db: Path) -> None:
    output = invoke("downgrade", "0009").output
    assert "0020 (head) → 0009 (11 revisions applied)" in output
    assert _versions(seeded_db) == ([("0009",)], [(9,)])
    assert json.loads(invoke("current", "--json").output)["revision"] == "0009"
    # Data commands are not run on an old schema behind the operator's back by 'current'/'info'…
    assert json.loads(invoke("info", "--json").output)["revision"] == "0009"
    invoke("upgrade")
    assert _versions(seeded_db) == ([("0020",)], [(17,)])
    with SessionDB(seeded_db) as db:
        assert db.message_count() == 17
        assert db.search_messages("docker")[0]["session_id"] == "alpha-deploy"


def test_upgrade_to_a_revision(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "partial.db"
    invoke("upgrade", "0004", db=path)
    assert _versions(path) == ([("0004",)], [(4,)])
    unknown = invoke("upgrade", "nonsense", db=path, status=1)
    assert unknown.output.startswith("Error:")
    assert "Traceback" not in unknown.output


def test_upgrade_adopts_a_legacy_database(invoke: Invoke, legacy_v5: Path) -> None:
    before = sqlite3.connect(legacy_v5).execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    output = invoke("upgrade", db=legacy_v5).output
    assert "legacy schema_version 5 (not yet adopted) → 0020 (head)" in output
    assert _versions(legacy_v5) == ([("0020",)], [(17,)])
    assert json.loads(invoke("info", "--json", db=legacy_v5).output)["messages"] == before


def test_downgrade_to_base_asks_first(invoke: Invoke, seeded_db: Path) -> None:
    refused = invoke("downgrade", "base", input="n\n", status=1)
    assert "deletes all data" in refused.output
    assert _versions(seeded_db)[0] == [("0020",)]


def test_a_downgrade_below_0019_says_what_it_drops_and_asks_first(invoke: Invoke, seeded_db: Path) -> None:
    """The previous release cannot hide or route: the command names what the rollback
    changes, with counts, and goes on only when told (hidden messages come back with the
    next upgrade, hidden as they were)."""
    with SessionDB(seeded_db) as db:
        db.apply_telegram_topic_migration()
        db.enable_telegram_topic_mode(chat_id=1, user_id=2)
    with closing(sqlite3.connect(seeded_db)) as connection, connection:
        connection.execute("UPDATE messages SET active = 0 WHERE id IN (SELECT id FROM messages LIMIT 2)")
        connection.execute("UPDATE sessions SET archived = 1 WHERE id = 'alpha-deploy'")
    refused = invoke("downgrade", "0018", input="n\n", status=1)
    assert (
        "Downgrading " + str(seeded_db) + " to 0018: 1 Telegram topic chat(s) dropped; 1 archived session(s) "
        "listed again; 2 rewound or compacted-away message(s) set aside until the next upgrade. Continue?"
    ) in " ".join(refused.output.split())
    assert _versions(seeded_db)[0] == [("0020",)]
    assert "0020 (head) → 0018" in invoke("downgrade", "0018", "--yes").output
    with closing(sqlite3.connect(seeded_db)) as connection:
        assert connection.execute("SELECT count(*) FROM messages").fetchone() == (15,)
    invoke("upgrade")
    with SessionDB(seeded_db) as db:
        assert db.message_count() == 17


def test_current(invoke: Invoke, seeded_db: Path) -> None:
    assert invoke("current").output.startswith("0020 (head)  schema_version 17")
    state = json.loads(invoke("current", "--json").output)
    assert state == {
        "database": str(seeded_db),
        "exists": True,
        "revision": "0020",
        "schema_version": 17,
        "head": "0020",
        "at_head": True,
        "newer": False,
    }


def test_history(invoke: Invoke, tmp_path: Path) -> None:
    rows = json.loads(invoke("history", "--json").output)
    assert [row["revision"] for row in rows] == [f"{n:04d}" for n in range(1, 21)]
    assert rows[-1]["head"] and rows[-1]["current"]
    assert not any(row["current"] for row in rows[:-1])
    output = invoke("history").output
    assert "0020" in output and "current, head" in output
    # Without a database the list is still shown, and no file is created.
    missing = tmp_path / "missing.db"
    assert len(json.loads(invoke("history", "--json", db=missing).output)) == len(rows)
    assert not missing.exists()
