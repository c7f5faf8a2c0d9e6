"""Stores for the ``hermes-store copy`` tests: filled fast, compared row by row.

:func:`fill_store` writes sessions and messages with plain ``sqlite3`` into a store that
``SessionDB`` created (its triggers fill the FTS5 indexes), so a few thousand messages
take a fraction of a second instead of one ``append_message`` each. :func:`table_rows`
reads every column of a table through the store's models on any backend, values as
the library hands them back, so two stores can be compared exactly.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, func, inspect, select
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

from hermes_store import SessionDB
from hermes_store.schema.models import (
    Base,
    CompressionLock,
    Message,
    Session,
    StateMeta,
    TelegramTopicBinding,
    TelegramTopicMode,
)

COPIED_MODELS: tuple[type[Base], ...] = (
    Session,
    Message,
    StateMeta,
    CompressionLock,
    TelegramTopicMode,
    TelegramTopicBinding,
)

WORDS = [
    "deploy",
    "pipeline",
    "container",
    "kubernetes",
    "gateway",
    "retries",
    "timeout",
    "upstream",
    "database",
    "migration",
    "telegram",
    "session",
    "summary",
    "compression",
    "branch",
    "ancestor",
    "tokens",
    "invoice",
    "ledger",
    "quartz",
    "marble",
    "harbour",
    "lantern",
    "meadow",
    "orchard",
    "saffron",
    "tundra",
    "velvet",
    "walnut",
    "zephyr",
]


def fill_store(path: Path, sessions: int, per_session: int) -> int:
    """Create a store at ``path`` holding ``sessions`` × ``per_session`` messages (ids from 1,
    every third session a child of the one before, JSON and CJK content, tool calls,
    counters and costs, one metadata row); returns the number of messages."""
    SessionDB(path).close()
    message_rows: list[tuple[Any, ...]] = []
    session_rows: list[tuple[Any, ...]] = []
    next_id = 1
    for s in range(sessions):
        session_id = f"s{s:05d}"
        started = 1_700_000_000.0 + s * 97.125
        parent = f"s{s - 1:05d}" if s % 3 == 2 else None
        tool_calls = 0
        for m in range(per_session):
            word = WORDS[(s * 7 + m * 3) % len(WORDS)]
            other = WORDS[(s + m * 11) % len(WORDS)]
            content: Any = f"{word} {other} message {m} of {session_id} 记忆断裂 {s % 5}"
            calls = None
            if m % 4 == 1:
                calls = json.dumps([{"id": f"c{m}", "function": {"name": "terminal", "arguments": word}}])
                tool_calls += 1
            if m % 9 == 5:
                content = "\x00json:" + json.dumps([{"type": "text", "text": f"{word} picture"}])
            message_rows.append(
                (
                    next_id,
                    session_id,
                    "user" if m % 2 == 0 else "assistant",
                    content,
                    calls,
                    "terminal" if calls else None,
                    started + m * 1.0625,
                    m + 1,
                )
            )
            next_id += 1
        session_rows.append(
            (
                session_id,
                "cli" if s % 4 else "telegram",
                parent,
                started,
                started + per_session * 2.0,
                per_session,
                tool_calls,
                10 * s,
                3 * s,
                0.000123 * s,
                f"Title {s}" if s % 2 else None,
            )
        )
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.executemany(
            "INSERT INTO sessions (id, source, parent_session_id, started_at, ended_at, message_count, "
            "tool_call_count, input_tokens, output_tokens, estimated_cost_usd, title) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            session_rows,
        )
        connection.executemany(
            "INSERT INTO messages (id, session_id, role, content, tool_calls, tool_name, timestamp, "
            "token_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            message_rows,
        )
        connection.execute("INSERT INTO state_meta (key, value) VALUES ('last_auto_prune', '123.5')")
    return len(message_rows)


def table_rows(engine: Engine, model: type[Base]) -> list[tuple[Any, ...]]:
    """Every row of ``model``'s table, every column, in primary-key order (none when the
    store lacks the table: a SQLite store creates the Telegram topic tables on first use)."""
    table = model.__table__
    key = list(table.primary_key.columns)
    if not inspect(engine).has_table(table.name):
        return []
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(select(*table.columns).order_by(*key))]


TOPIC_SCHEMA_KEY = "telegram_dm_topic_schema_version"


def assert_same_store(source: Engine, target: Engine) -> None:
    """Both stores hold exactly the same rows in every copied table; the Telegram
    topic-schema key may be in one side's ``state_meta`` only when the other never used
    topic mode (a PostgreSQL store holds it from its creation)."""
    for model in COPIED_MODELS:
        ours, theirs = table_rows(source, model), table_rows(target, model)
        if model is StateMeta and (TOPIC_SCHEMA_KEY in dict(ours)) != (TOPIC_SCHEMA_KEY in dict(theirs)):
            ours, theirs = ([row for row in rows if row[0] != TOPIC_SCHEMA_KEY] for rows in (ours, theirs))
        assert theirs == ours, model.__tablename__


def fill_head_extras(path: Path) -> None:
    """Give a store at head (filled by :func:`fill_store`, at least 3 sessions) what only
    schema 17 has: gateway, workspace, handoff and rewind columns on sessions, platform
    ids and context flags on messages, a compression lease and Telegram topic rows (their
    tables created as topic mode's first use creates them)."""
    with SessionDB(path) as store:
        store.apply_telegram_topic_migration()
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute(
            "UPDATE sessions SET session_key = 'agent:main:telegram:dm:42', chat_id = '42', "
            "chat_type = 'dm', thread_id = '7', cwd = '/srv/app', git_branch = 'main', "
            "handoff_state = 'pending', compression_failure_cooldown_until = 1700000123.25, "
            "rewind_count = 2, archived = 1 WHERE id = 's00001'"
        )
        connection.execute(
            "UPDATE messages SET platform_message_id = 'tg-' || id, observed = 1 WHERE id % 5 = 0"
        )
        connection.execute("UPDATE messages SET active = 0, compacted = 1 WHERE id IN (2, 3)")
        connection.execute("UPDATE messages SET active = 0 WHERE id = 4")
        connection.execute(
            "INSERT INTO compression_locks (session_id, holder, acquired_at, expires_at) "
            "VALUES ('s00002', 'worker-1', 1700000000.5, 1700000300.5)"
        )
        connection.execute(
            "INSERT INTO telegram_dm_topic_mode (chat_id, user_id, enabled, activated_at, updated_at, "
            "has_topics_enabled, intro_message_id) "
            "VALUES ('42', 'u42', 1, 1700000001.0, 1700000002.5, 1, '900')"
        )
        connection.execute(
            "INSERT INTO telegram_dm_topic_bindings (chat_id, thread_id, user_id, session_key, session_id, "
            "linked_at, updated_at) VALUES ('42', '7', 'u42', 'agent:main:telegram:dm:42:7', 's00001', "
            "1700000003.0, 1700000004.0)"
        )


def make_old_store(path: Path, revision: str = "0009") -> None:
    """A SQLite store at ``revision`` (behind head) holding two sessions, one a child of
    the other, four messages (one JSON content) and a metadata row, written with plain
    ``sqlite3`` in the columns that revision has."""
    from hermes_store.db.engine import create_engine
    from hermes_store.schema.migrate import upgrade

    engine = create_engine(path)
    try:
        upgrade(engine, revision)
    finally:
        engine.dispose()
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.executemany(
            "INSERT INTO sessions (id, source, parent_session_id, started_at, message_count, title, "
            "api_call_count) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                ("old-root", "cli", None, 1600000000.5, 3, "Old root", 4),
                ("old-child", "cli", "old-root", 1600000100.0, 1, None, 0),
            ],
        )
        connection.executemany(
            "INSERT INTO messages (id, session_id, role, content, timestamp, codex_message_items) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [
                (1, "old-root", "user", "walnut harbour question", 1600000001.0, None),
                (2, "old-root", "assistant", "lantern answer", 1600000002.0, '[{"type": "x"}]'),
                (
                    3,
                    "old-root",
                    "user",
                    "\x00json:" + json.dumps([{"type": "text", "text": "meadow"}]),
                    1600000003.0,
                    None,
                ),
                (4, "old-child", "user", "orchard follow up", 1600000101.0, None),
            ],
        )
        connection.execute("INSERT INTO state_meta (key, value) VALUES ('last_auto_prune', '99.5')")


def copy_command(source: str | Path, target: str | Path, *extra: str, batch_size: int = 20) -> list[str]:
    """``hermes-store copy`` as a subprocess runs it, in batches of ``batch_size`` rows."""
    return [
        sys.executable, "-m", "hermes_store.cli", "copy", str(source), str(target),
        "--batch-size", str(batch_size), *extra,
    ]  # fmt: skip


def copy_environment() -> dict[str, str]:
    """The test's environment without a default store URL (the copy names both stores)."""
    return {key: value for key, value in os.environ.items() if key != "HERMES_STORE_URL"}


def _committed_messages(engine: Engine) -> int:
    if not inspect(engine).has_table("messages"):
        return 0
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(Message)).scalar_one())


def kill_copy_after(source: str | Path, target: str, messages: int) -> None:
    """Start ``hermes-store copy SOURCE TARGET`` in a subprocess and SIGKILL it once at least
    ``messages`` messages are committed in the target (polled, never after a sleep)."""
    copying = subprocess.Popen(
        copy_command(source, target), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=copy_environment()
    )
    engine = create_engine(target, poolclass=NullPool)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and copying.poll() is None:
            if _committed_messages(engine) >= messages:
                break
        copying.send_signal(signal.SIGKILL)
        copying.communicate(timeout=30)
    finally:
        engine.dispose()
    assert copying.returncode == -signal.SIGKILL, "the copy ended before it was killed"
