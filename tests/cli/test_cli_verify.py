"""``hermes-store verify SOURCE TARGET``: every row, every column, and the schema.

Each corruption is made in a copied SQLite target with plain ``sqlite3`` after the copy;
the verification must fail naming the table, the key and the column (or the schema
object). The PostgreSQL side (content sentinels, dropped indexes and foreign keys) is in
``tests/postgres/test_pg_copy.py``.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import Result
from copy_support import fill_head_extras, fill_store

from hermes_store.admin.transfer import copy_store
from hermes_store.db.engine import create_engine

Invoke = Callable[..., Result]


@pytest.fixture(scope="module")
def copied_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A source with every kind of row, and an exact copy of it (made once)."""
    folder = tmp_path_factory.mktemp("verify")
    source, target = folder / "source.db", folder / "target.db"
    fill_store(source, 5, 12)
    fill_head_extras(source)
    engines = create_engine(source), create_engine(target)
    copy_store(*engines)
    for engine in engines:
        engine.dispose()  # the last connection checkpoints the WAL into the file
    return source, target


@pytest.fixture
def copied(copied_once: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of :func:`copied_once` for one test."""
    private = []
    for path in copied_once:
        shutil.copyfile(path, tmp_path / path.name)
        private.append(tmp_path / path.name)
    return private[0], private[1]


def _run(path: Path, *statements: str) -> None:
    with closing(sqlite3.connect(path)) as connection, connection:
        for statement in statements:
            connection.execute(statement)


def test_verify_passes_on_an_exact_copy(invoke: Invoke, copied: tuple[Path, Path]) -> None:
    source, target = copied
    summary = json.loads(invoke("verify", str(source), str(target), "--json", raw=True).output)
    assert (summary["sessions"], summary["messages"], summary["meta"]) == (5, 60, 2)
    assert summary["schema_objects"] > 20
    assert summary["verified_searches"]
    text = invoke("verify", str(source), str(target), raw=True).output
    assert text.startswith("Verified 5 session(s), 60 message(s) and 2 metadata row(s): every row matches")


# (statement corrupting the target, what the error names)
CORRUPTIONS = [
    ("UPDATE messages SET content = 'tampered' WHERE id = 17", "messages 17 column content: source '"),
    (
        "UPDATE messages SET role = 'system' WHERE id = 30",
        "messages 30 column role: source 'assistant', target 'system'",
    ),
    (
        "UPDATE sessions SET title = 'Other' WHERE id = 's00003'",
        "sessions 's00003' column title: source 'Title 3'",
    ),
    ("UPDATE sessions SET model = 'gpt' WHERE id = 's00000'", "sessions 's00000' column model: source None"),
    ("UPDATE sessions SET system_prompt = 'x' WHERE id = 's00004'", "sessions 's00004' column system_prompt"),
    ("UPDATE messages SET tool_calls = '[]' WHERE id = 2", "messages 2 column tool_calls"),
    ("UPDATE messages SET timestamp = timestamp + 0.000001 WHERE id = 5", "messages 5 column timestamp"),
    ("UPDATE messages SET active = 1 WHERE id = 4", "messages 4 column active: source 0, target 1"),
    (
        "UPDATE state_meta SET value = '124.5' WHERE key = 'last_auto_prune'",
        "state_meta 'last_auto_prune' column value",
    ),
    (
        "DELETE FROM state_meta WHERE key = 'telegram_dm_topic_schema_version'",
        "'telegram_dm_topic_schema_version' is missing",
    ),
    (
        "UPDATE compression_locks SET holder = 'me'",
        "compression_locks 's00002' column holder: source 'worker-1', target 'me'",
    ),
    ("UPDATE telegram_dm_topic_mode SET updated_at = 1", "telegram_dm_topic_mode '42' column updated_at"),
    (
        "UPDATE telegram_dm_topic_bindings SET managed_mode = 'manual'",
        "telegram_dm_topic_bindings ('42', '7') column managed_mode",
    ),
    ("DROP INDEX idx_messages_session", "index idx_messages_session on messages is missing from the target"),
    (
        "DROP TRIGGER messages_fts_insert",
        "trigger messages_fts_insert on messages is missing from the target",
    ),
    (
        "CREATE INDEX mine ON sessions (model)",
        "index mine on sessions is in the target but not in a fresh store",
    ),
]


@pytest.mark.parametrize(("corruption", "named"), CORRUPTIONS, ids=[named[:40] for _, named in CORRUPTIONS])
def test_verify_names_the_first_difference(
    invoke: Invoke, copied: tuple[Path, Path], corruption: str, named: str
) -> None:
    source, target = copied
    _run(target, corruption)
    output = invoke("verify", str(source), str(target), status=1, raw=True).output.strip()
    assert output.splitlines() == [output]
    assert output.startswith("Error: the target")
    assert named in output


def test_verify_names_a_message_the_target_lacks(invoke: Invoke, copied: tuple[Path, Path]) -> None:
    source, target = copied
    # The counts still agree: one message gone, another one added to the same session.
    _run(
        target,
        "INSERT INTO messages (id, session_id, role, content, timestamp) "
        "VALUES (1000, 's00000', 'user', 'x', 1)",
        "DELETE FROM messages WHERE id = 7",
    )
    output = invoke("verify", str(source), str(target), status=1, raw=True).output
    assert "messages 7 is missing from the target" in output


def test_verify_refuses_a_target_holding_an_unfinished_copy(
    invoke: Invoke, copied: tuple[Path, Path]
) -> None:
    source, target = copied
    _run(target, "CREATE TABLE hermes_copy_state (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    output = invoke("verify", str(source), str(target), status=1, raw=True).output
    assert "the target holds an unfinished copy: finish it with hermes-store copy --resume" in output


def test_verify_reads_both_stores_without_writing(invoke: Invoke, copied: tuple[Path, Path]) -> None:
    source, target = copied
    before = source.read_bytes(), target.read_bytes()
    invoke("verify", str(source), str(target), raw=True)
    assert (source.read_bytes(), target.read_bytes()) == before


def test_verify_refuses_a_target_newer_than_this_release(invoke: Invoke, copied: tuple[Path, Path]) -> None:
    source, target = copied
    _run(target, "UPDATE alembic_version SET version_num = '9999'")
    output = invoke("verify", str(source), str(target), status=1, raw=True).output.strip()
    assert output.startswith("Error: the target is at schema revision 9999, newer than this hermes-store")
