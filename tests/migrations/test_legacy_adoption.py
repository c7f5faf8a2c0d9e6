"""Adopting databases upstream Hermes wrote, at every schema version, with every row kept.

Legacy files (``schema_version``, no ``alembic_version``) are built by ``legacy_db`` with
plain sqlite3 and adopted both in-process (``ensure_schema``) and by the real ``alembic``
command. Also: ragged files, duplicate titles, files from a newer release, the cheap
up-to-date check, atomicity of a failing upgrade and concurrent first opens.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
import textwrap
import time
from contextlib import closing
from pathlib import Path

import pytest
import sqlalchemy as sa
from legacy_db import (
    COLUMNS_ADDED,
    CONTENT_JSON_PREFIX,
    alembic_versions,
    build_legacy_db,
    connect,
    fts_integrity_check,
    fts_rowids,
    master,
    populate,
    read_rows,
    restrict,
    schema_versions,
)
from support import REPO_ROOT, run_alembic, subprocess_env

from hermes_store import models
from hermes_store.db.engine import create_engine
from hermes_store.schema import migrate
from hermes_store.schema.legacy import HEAD_VERSION, NewerSchemaWarning
from hermes_store.schema.revisions import history

FTS_TABLES = ("messages_fts", "messages_fts_trigram")
ADOPTERS = ("ensure_schema", "alembic upgrade head")
ALL_SESSION_COLUMNS = 41
ALL_MESSAGE_COLUMNS = 19
HEAD = history().head


def adopt(path: Path, how: str) -> None:
    """Bring ``path`` to head the way a service (ensure_schema) or a deploy (CLI) would."""
    if how == "ensure_schema":
        engine = create_engine(path)
        try:
            migrate.ensure_schema(engine)
        finally:
            engine.dispose()
    else:
        run_alembic(path, "upgrade", "head")


def snapshot(path: Path) -> dict[str, dict]:
    return {t: read_rows(path, t) for t in ("sessions", "messages")}


def assert_rows_kept(path: Path, before: dict[str, dict]) -> None:
    """Same row keys, and every column that existed before holds the same typed value."""
    for table in ("sessions", "messages"):
        after = read_rows(path, table)
        assert set(after) == set(before[table]), table
        old_columns = set(next(iter(before[table].values())))
        assert restrict(after, old_columns) == before[table], table


def columns(path: Path, table: str) -> list[str]:
    with closing(sqlite3.connect(str(path))) as conn:
        return [str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")]


def dump(path: Path) -> list[str]:
    """The whole database as SQL text: schema and every row of every table."""
    with closing(sqlite3.connect(str(path))) as conn:
        return list(conn.iterdump())


# --- the builder itself writes what upstream wrote ---------------------------------------


def test_legacy_builder_writes_upstream_encodings_and_schema(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
    legacy = build_legacy_db(path, 5)
    written = populate(path)
    assert schema_versions(path) == [5]
    assert alembic_versions(path) is None
    assert "title" in legacy.columns["sessions"] and "api_call_count" not in legacy.columns["sessions"]
    assert "reasoning" not in legacy.columns["messages"]
    assert "content=messages" in master(path)[("table", "messages_fts")].replace(" ", "")
    assert legacy.has_title_index
    rows = read_rows(path, "messages")
    multimodal = rows[written.messages[3]["id"]]["content"]
    assert multimodal[0] == "text" and multimodal[1].startswith(CONTENT_JSON_PREFIX + '[{"type": "text"')
    tool_calls = rows[written.messages[1]["id"]]["tool_calls"][1]
    assert '"name": "web_search"' in tool_calls and "\\\\u8bb0\\\\u5fc6" in tool_calls
    sessions = read_rows(path, "sessions")
    root = sessions["20260301_101500_ab12cd"]
    assert root["started_at"] == ("real", 1772360100.123456)
    assert root["model_config"] == (
        "text",
        '{"temperature": 0.3, "max_tokens": 4096, "persona": "\\u8bb0\\u5fc6"}',
    )
    assert root["message_count"] == ("integer", 3) and root["tool_call_count"] == ("integer", 1)
    assert fts_rowids(path, "messages_fts", "kubernetes") == [written.messages[0]["id"]]


# --- every version, both adopters --------------------------------------------------------


# In-process adoption on every version; the alembic command (a subprocess, ten times the
# cost) on versions spread over the history: both run the same adoption code, and what
# the command adds (env.py, the -x url, its output) does not depend on the version.
ADOPTION_CASES = [(version, "ensure_schema") for version in range(1, 12)] + [
    (version, "alembic upgrade head") for version in (1, 5, 8, 11)
]


@pytest.mark.parametrize(("version", "how"), ADOPTION_CASES)
def test_legacy_database_of_every_version_is_adopted_with_every_row_kept(
    tmp_path: Path, version: int, how: str
) -> None:
    path = tmp_path / "state.db"
    build_legacy_db(path, version)
    written = populate(path)
    before = snapshot(path)
    ids = [m["id"] for m in written.messages]

    adopt(path, how)

    assert schema_versions(path) == [HEAD_VERSION]
    assert alembic_versions(path) == [HEAD]
    assert_rows_kept(path, before)
    assert len(columns(path, "sessions")) == ALL_SESSION_COLUMNS
    assert len(columns(path, "messages")) == ALL_MESSAGE_COLUMNS
    if version < 8:  # api_call_count arrives with its DEFAULT 0 for existing rows
        assert {row["api_call_count"] for row in read_rows(path, "sessions").values()} == {("integer", 0)}
    for table in FTS_TABLES:
        fts_integrity_check(path, table)
        assert fts_rowids(path, table, "kubernetes") == [ids[0]]
        assert fts_rowids(path, table, "terminal") == [ids[5]]  # tool name only: indexed since v11
        assert fts_rowids(path, table, '"web_search"') == [ids[1], ids[2]]
    assert fts_rowids(path, "messages_fts_trigram", "记忆断裂") == [ids[4]]
    assert ("index", "idx_sessions_title_unique") in master(path)


# --- ragged files ------------------------------------------------------------------------


@pytest.mark.parametrize("how", ADOPTERS)
def test_v7_missing_reasoning_content_gains_it(tmp_path: Path, how: str) -> None:
    path = tmp_path / "state.db"
    build_legacy_db(path, 7, ragged_missing=[("messages", "reasoning_content")])
    assert "reasoning_content" not in columns(path, "messages")
    populate(path)
    before = snapshot(path)
    adopt(path, how)
    assert "reasoning_content" in columns(path, "messages")
    assert {r["reasoning_content"] for r in read_rows(path, "messages").values()} == {("null", None)}
    assert_rows_kept(path, before)
    assert schema_versions(path) == [HEAD_VERSION] and alembic_versions(path) == [HEAD]


@pytest.mark.parametrize("how", ADOPTERS)
def test_v2_that_already_has_v5_columns_upgrades_and_keeps_their_values(tmp_path: Path, how: str) -> None:
    path = tmp_path / "state.db"
    v5_columns = [(table, column) for table, column, _ in COLUMNS_ADDED[5]]
    build_legacy_db(path, 2, extra_columns=v5_columns)
    populate(path)
    before = snapshot(path)
    root = before["sessions"]["20260301_101500_ab12cd"]
    assert root["estimated_cost_usd"] == ("real", 0.0421875)
    assert root["billing_provider"] == ("text", "openrouter")
    adopt(path, how)
    assert_rows_kept(path, before)
    assert len(columns(path, "sessions")) == ALL_SESSION_COLUMNS
    assert schema_versions(path) == [HEAD_VERSION] and alembic_versions(path) == [HEAD]


@pytest.mark.parametrize("how", ADOPTERS)
def test_v11_without_title_index_gains_it(tmp_path: Path, how: str) -> None:
    path = tmp_path / "state.db"
    legacy = build_legacy_db(path, 11, without_title_index=True)
    assert not legacy.has_title_index
    written = populate(path)
    before = snapshot(path)
    adopt(path, how)
    sql = master(path)[("index", "idx_sessions_title_unique")]
    assert "WHERE title IS NOT NULL" in sql
    assert_rows_kept(path, before)
    for table in FTS_TABLES:
        fts_integrity_check(path, table)
        assert fts_rowids(path, table, "terminal") == [written.messages[5]["id"]]


def test_two_schema_version_rows_from_racing_upstream_opens_become_one(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    build_legacy_db(path, 9)
    populate(path)
    with closing(connect(path)) as conn:
        conn.execute("INSERT INTO schema_version (version) VALUES (9)")
    assert schema_versions(path) == [9, 9]
    before = snapshot(path)
    adopt(path, "ensure_schema")
    assert schema_versions(path) == [HEAD_VERSION]
    assert alembic_versions(path) == [HEAD]
    assert_rows_kept(path, before)


# --- duplicate titles --------------------------------------------------------------------

DUPLICATE_TITLE_SESSIONS = [
    {"id": "a", "source": "cli", "started_at": 300.5, "title": "Plan"},
    {"id": "b", "source": "cli", "started_at": 100.25, "title": "Plan"},
    {"id": "c", "source": "cli", "started_at": 200.0, "title": "Plan"},
    {"id": "d", "source": "cli", "started_at": 50.0, "title": "Plan #2"},
    {"id": "e", "source": "tui", "started_at": 10.0, "title": "Other"},
    {"id": "f", "source": "tui", "started_at": 20.0, "title": "Other"},
    {"id": "g", "source": "tui", "started_at": 30.0, "title": "plan"},
    {"id": "h", "source": "tui", "started_at": 40.0, "title": None},
    {"id": "i", "source": "tui", "started_at": 41.0, "title": None},
]
TITLES_AFTER = {
    "a": "Plan #4",
    "b": "Plan",
    "c": "Plan #3",
    "d": "Plan #2",
    "e": "Other",
    "f": "Other #2",
    "g": "plan",
    "h": None,
    "i": None,
}
DUPLICATE_MESSAGES = [
    {"session_id": "a", "role": "user", "content": "first plan draft", "timestamp": 300.75},
    {"session_id": "c", "role": "user", "content": "second plan draft", "timestamp": 200.5},
]


def titles(path: Path) -> dict[str, str | None]:
    with closing(sqlite3.connect(str(path))) as conn:
        return {str(r[0]): r[1] for r in conn.execute("SELECT id, title FROM sessions")}


@pytest.mark.parametrize(
    ("version", "options"), [(3, {}), (11, {"without_title_index": True})], ids=["v3", "v11-no-index"]
)
def test_duplicate_titles_are_numbered_in_started_at_order_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, version: int, options: dict[str, bool]
) -> None:
    path = tmp_path / "state.db"
    build_legacy_db(path, version, **options)
    populate(path, sessions=DUPLICATE_TITLE_SESSIONS, messages=DUPLICATE_MESSAGES)
    before = snapshot(path)
    with caplog.at_level(logging.WARNING):
        adopt(path, "ensure_schema")
    assert titles(path) == TITLES_AFTER
    assert ("index", "idx_sessions_title_unique") in master(path)
    unchanged = {k: {c: v for c, v in row.items() if c != "title"} for k, row in before["sessions"].items()}
    assert restrict(read_rows(path, "sessions"), set(unchanged["a"])) == unchanged
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    renamed = [m for m in warnings if "duplicate session title" in m]
    assert len(renamed) == 3
    assert any("'Plan #4'" in m for m in renamed) and any("'Other #2'" in m for m in renamed)


def test_duplicate_titles_are_renamed_by_the_alembic_command_too(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    build_legacy_db(path, 3)
    populate(path, sessions=DUPLICATE_TITLE_SESSIONS, messages=DUPLICATE_MESSAGES)
    result = run_alembic(path, "upgrade", "head")
    assert titles(path) == TITLES_AFTER
    assert "'Plan #3'" in result.stderr and "'Plan #4'" in result.stderr


# --- databases from a newer release ------------------------------------------------------


def newer_legacy_db(path: Path) -> None:
    """A file from an upstream newer than ours: one more column and schema_version 18,
    no alembic_version."""
    build_legacy_db(path, 11)
    populate(path)
    with closing(connect(path)) as conn:
        conn.execute("ALTER TABLE messages ADD COLUMN platform_message_id TEXT")
        conn.execute(f"UPDATE schema_version SET version = {HEAD_VERSION + 1}")


def newer_revision_db(path: Path) -> None:
    """A file a newer hermes_store stamped with a revision we do not know."""
    build_legacy_db(path, 11)
    populate(path)
    with closing(connect(path)) as conn:
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
        conn.execute("INSERT INTO alembic_version VALUES ('0099')")


@pytest.mark.parametrize(
    ("make", "expected_revision", "expected_version"),
    [(newer_legacy_db, None, HEAD_VERSION + 1), (newer_revision_db, ["0099"], 11)],
    ids=["schema_version-18", "revision-0099"],
)
def test_newer_database_opens_with_a_warning_and_is_never_stamped(
    tmp_path: Path, make, expected_revision: list[str] | None, expected_version: int
) -> None:
    path = tmp_path / "state.db"
    make(path)
    before_dump = dump(path)
    engine = create_engine(path)
    try:
        with pytest.warns(NewerSchemaWarning):
            state = migrate.ensure_schema(engine)
        assert state.newer
        with engine.connect() as conn:
            contents = conn.execute(sa.select(models.Message.content).order_by(models.Message.id)).scalars()
            assert next(iter(contents)) == "How do I rotate the kubernetes secrets in staging?"
            titles_read = conn.execute(sa.select(models.Session.title).order_by(models.Session.id)).all()
            assert len(titles_read) == 3
    finally:
        engine.dispose()
    assert alembic_versions(path) == expected_revision
    assert schema_versions(path) == [expected_version]
    assert dump(path) == before_dump


@pytest.mark.parametrize(
    "make", [newer_legacy_db, newer_revision_db], ids=["schema_version-18", "revision-0099"]
)
def test_alembic_command_leaves_a_newer_database_untouched(tmp_path: Path, make) -> None:
    path = tmp_path / "state.db"
    make(path)
    before_dump = dump(path)
    run_alembic(path, "upgrade", "head")
    assert dump(path) == before_dump


# --- the cheap check on an up-to-date database -------------------------------------------

PROBE = textwrap.dedent(
    """
    import json, sys, time
    from hermes_store.db.engine import create_engine
    from hermes_store.schema.migrate import ensure_schema

    engine = create_engine(sys.argv[1])
    started = time.perf_counter()
    state = ensure_schema(engine)
    elapsed = time.perf_counter() - started
    print(json.dumps({
        "alembic_imported": "alembic" in sys.modules,
        "revision": state.revision,
        "elapsed_ms": round(elapsed * 1000, 3),
    }))
    """
)


def run_probe(path: Path, cwd: Path) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(path)],
        cwd=cwd,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_opening_an_up_to_date_database_does_not_import_alembic(db_path: Path, tmp_path: Path) -> None:
    migrate.upgrade(db_path)
    up_to_date = run_probe(db_path, tmp_path)
    assert up_to_date["alembic_imported"] is False
    assert up_to_date["revision"] == HEAD
    print(f"ensure_schema on an up-to-date database took {up_to_date['elapsed_ms']} ms")
    # A new file is created from the head snapshot (hermes_store.schema.sqlite_head), no
    # Alembic either; the probe can see the import: a legacy file that needs migrating does.
    fresh = run_probe(tmp_path / "fresh.db", tmp_path)
    assert fresh["alembic_imported"] is False
    assert fresh["revision"] == HEAD
    legacy = tmp_path / "legacy.db"
    build_legacy_db(legacy, 10)
    needs_work = run_probe(legacy, tmp_path)
    assert needs_work["alembic_imported"] is True
    assert needs_work["revision"] == HEAD


# --- a failing upgrade -------------------------------------------------------------------

REFUSE_TITLE_CHANGES = (
    "CREATE TRIGGER refuse_session_updates BEFORE UPDATE ON sessions BEGIN SELECT RAISE(ABORT, 'boom'); END"
)


def failing_legacy_db(path: Path, version: int) -> None:
    """A legacy file whose revision 0004 must rename a duplicate title, and cannot."""
    extra = [("sessions", "title")] if version < 3 else []
    build_legacy_db(path, version, extra_columns=extra)
    populate(path, sessions=DUPLICATE_TITLE_SESSIONS, messages=DUPLICATE_MESSAGES)
    with closing(connect(path)) as conn:
        conn.execute(REFUSE_TITLE_CHANGES)


@pytest.mark.parametrize("version", [1, 3], ids=["v1-with-title", "v3"])
@pytest.mark.parametrize("entry", ["ensure_schema", "migrate.upgrade"])
def test_failed_in_process_upgrade_leaves_the_file_exactly_as_before(
    tmp_path: Path, version: int, entry: str
) -> None:
    path = tmp_path / "state.db"
    failing_legacy_db(path, version)
    before = dump(path)
    engine = create_engine(path)
    try:
        with pytest.raises(sa.exc.IntegrityError, match="boom"):
            if entry == "ensure_schema":
                migrate.ensure_schema(engine)
            else:
                migrate.upgrade(engine)
    finally:
        engine.dispose()
    assert dump(path) == before
    assert alembic_versions(path) is None
    assert schema_versions(path) == [version]


@pytest.mark.parametrize("version", [1, 3], ids=["v1-with-title", "v3"])
def test_failed_cli_upgrade_keeps_the_revisions_before_the_failing_one(tmp_path: Path, version: int) -> None:
    path = tmp_path / "state.db"
    failing_legacy_db(path, version)
    before_titles = titles(path)
    result = run_alembic(path, "upgrade", "head", check=False)
    assert result.returncode != 0
    assert "boom" in result.stderr
    assert alembic_versions(path) == ["0003"]
    assert schema_versions(path) == [3]
    assert "finish_reason" in columns(path, "messages")  # 0002 committed
    assert titles(path) == before_titles  # 0004's renames rolled back
    objects = master(path)
    assert ("index", "idx_sessions_title_unique") not in objects
    assert "cache_read_tokens" not in columns(path, "sessions")


# --- concurrent first opens --------------------------------------------------------------

OPENER = textwrap.dedent(
    """
    import os, sys, time
    from hermes_store.db.engine import create_engine
    from hermes_store.schema.migrate import ensure_schema

    path, go = sys.argv[1], sys.argv[2]
    deadline = time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.005)
    engine = create_engine(path)
    state = ensure_schema(engine)
    print(state.revision, state.legacy_version)
    """
)


def test_concurrent_first_opens_all_succeed_and_migrate_once(db_path: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    openers = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER, str(db_path), str(go)],
            cwd=REPO_ROOT,
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    go.touch()
    outcomes = [(p.wait(timeout=120), *p.communicate()) for p in openers]
    for code, out, err in outcomes:
        assert code == 0, err
        assert out.split() == [HEAD, str(HEAD_VERSION)]
    assert alembic_versions(db_path) == [HEAD]
    assert schema_versions(db_path) == [HEAD_VERSION]


WAITER = textwrap.dedent(
    """
    import sys
    from hermes_store.db.engine import create_engine
    from hermes_store.schema.migrate import ensure_schema

    engine = create_engine(sys.argv[1])
    print("ready", flush=True)
    state = ensure_schema(engine)
    print(state.revision, flush=True)
    """
)


def test_first_open_queues_behind_a_migration_that_outlasts_the_busy_timeout(db_path: Path) -> None:
    # Another process is migrating a large legacy file (rebuilding its FTS indexes takes
    # seconds): it holds the write lock well past SQLite's 1 s busy timeout.
    build_legacy_db(db_path, 10)
    populate(db_path)
    with closing(sqlite3.connect(str(db_path), isolation_level=None)) as migrator:
        migrator.execute("BEGIN IMMEDIATE")
        opener = subprocess.Popen(
            [sys.executable, "-c", WAITER, str(db_path)],
            cwd=REPO_ROOT,
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert opener.stdout is not None
        assert opener.stdout.readline().strip() == "ready"
        time.sleep(3.0)  # hold the lock; not a timing assertion
        migrator.execute("ROLLBACK")
    out, err = opener.communicate(timeout=120)
    assert opener.returncode == 0, err
    assert out.split() == [HEAD]
    assert alembic_versions(db_path) == [HEAD]
