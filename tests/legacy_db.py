"""Build legacy upstream Hermes ``state.db`` files, at any schema version 1–17, for tests.

This module deliberately uses nothing but :mod:`sqlite3` and :mod:`json`: it plays the
part of the *other* program (upstream Hermes) that wrote a database before hermes_store
ever saw it, so it must not share a line of code with the package under test.

The schema a version-N file has is the version-1 DDL followed by the column additions of
every version up to N, in the order upstream's version-gated migration steps made them,
the unique title index from version 4, the external-content trigram index at version 10
and, at version 11, both FTS5 indexes rebuilt inline over content + tool name + tool-call
JSON (plus ``state_meta``). Ragged files — the kind upstream's column reconciliation
produced — are made with ``ragged_missing`` / ``extra_columns`` / ``without_title_index``.

:func:`populate` writes rows the way upstream's ``SessionDB`` wrote them: REAL epoch
seconds, JSON with Python's default (ASCII-escaping) encoder, the ``"\\x00json:"``
sentinel for list/dict message content, counters bumped per appended message. Only the
columns the file has are written; FTS tables are kept in step by the file's own triggers.
Every builder returns exactly what it wrote so tests can prove every row survives.

Versions 12–17 (:func:`build_upstream_db`) are a version-11 file plus what upstream's
later code added on open, step by step in the order it landed (:data:`LATER_STEPS`;
several steps came without a version bump, so a file's number does not say which it has):
``missing`` leaves steps out (a "v14" opened by a build from before ``cwd`` existed),
``ghosts`` adds the three columns upstream added and later dropped, ``topic_tables`` the
Telegram topic tables in their first (no cascade) or second shape.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONTENT_JSON_PREFIX = "\x00json:"

# --- schema history ----------------------------------------------------------------------

V1_TABLES = (
    """CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    user_id TEXT,
    model TEXT,
    model_config TEXT,
    system_prompt TEXT,
    parent_session_id TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER DEFAULT 0,
    tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0,
    output_tokens INTEGER DEFAULT 0,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id)
)""",
    """CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_calls TEXT,
    tool_name TEXT,
    timestamp REAL NOT NULL,
    token_count INTEGER
)""",
    "CREATE INDEX IF NOT EXISTS idx_sessions_source ON sessions(source)",
    "CREATE INDEX IF NOT EXISTS idx_sessions_parent ON sessions(parent_session_id)",
    "CREATE INDEX IF NOT EXISTS idx_sessions_started ON sessions(started_at DESC)",
    "CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, timestamp)",
)


def _external_content_fts(table: str, tokenize: str | None) -> tuple[str, ...]:
    """The pre-v11 FTS shape: external content over messages.content, 'delete'-command triggers."""
    options = "    content,\n    content=messages,\n    content_rowid=id"
    if tokenize:
        options += f",\n    tokenize='{tokenize}'"
    return (
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5(\n{options}\n)",
        f"""CREATE TRIGGER IF NOT EXISTS {table}_insert AFTER INSERT ON messages BEGIN
    INSERT INTO {table}(rowid, content) VALUES (new.id, new.content);
END""",
        f"""CREATE TRIGGER IF NOT EXISTS {table}_delete AFTER DELETE ON messages BEGIN
    INSERT INTO {table}({table}, rowid, content) VALUES('delete', old.id, old.content);
END""",
        f"""CREATE TRIGGER IF NOT EXISTS {table}_update AFTER UPDATE ON messages BEGIN
    INSERT INTO {table}({table}, rowid, content) VALUES('delete', old.id, old.content);
    INSERT INTO {table}(rowid, content) VALUES (new.id, new.content);
END""",
    )


V1_FTS = _external_content_fts("messages_fts", None)
V10_TRIGRAM = _external_content_fts("messages_fts_trigram", "trigram")
V10_TRIGRAM_BACKFILL = (
    "INSERT INTO messages_fts_trigram(rowid, content) "
    "SELECT id, content FROM messages WHERE content IS NOT NULL"
)

_INDEXED_TEXT = (
    "COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' ' || COALESCE(new.tool_calls, '')"
)


def _inline_fts(table: str, tokenize: str | None) -> tuple[str, ...]:
    """The v11 FTS shape: inline, one ``content`` column."""
    options = "    content" + (f",\n    tokenize='{tokenize}'" if tokenize else "")
    insert = f"""INSERT INTO {table}(rowid, content) VALUES (
        new.id,
        {_INDEXED_TEXT}
    );"""
    return (
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5(\n{options}\n)",
        f"CREATE TRIGGER IF NOT EXISTS {table}_insert AFTER INSERT ON messages BEGIN\n    {insert}\nEND",
        f"CREATE TRIGGER IF NOT EXISTS {table}_delete AFTER DELETE ON messages BEGIN\n"
        f"    DELETE FROM {table} WHERE rowid = old.id;\nEND",
        f"CREATE TRIGGER IF NOT EXISTS {table}_update AFTER UPDATE ON messages BEGIN\n"
        f"    DELETE FROM {table} WHERE rowid = old.id;\n    {insert}\nEND",
    )


V11_FTS = _inline_fts("messages_fts", None) + _inline_fts("messages_fts_trigram", "trigram")
V11_DROP_OLD_FTS = (
    "DROP TRIGGER IF EXISTS messages_fts_insert",
    "DROP TRIGGER IF EXISTS messages_fts_delete",
    "DROP TRIGGER IF EXISTS messages_fts_update",
    "DROP TRIGGER IF EXISTS messages_fts_trigram_insert",
    "DROP TRIGGER IF EXISTS messages_fts_trigram_delete",
    "DROP TRIGGER IF EXISTS messages_fts_trigram_update",
    "DROP TABLE IF EXISTS messages_fts",
    "DROP TABLE IF EXISTS messages_fts_trigram",
)
V11_BACKFILL = tuple(
    f"INSERT INTO {table}(rowid, content) SELECT id, "
    "COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, '') "
    "FROM messages"
    for table in ("messages_fts", "messages_fts_trigram")
)
STATE_META = """CREATE TABLE IF NOT EXISTS state_meta (
    key TEXT PRIMARY KEY,
    value TEXT
)"""
TITLE_INDEX = (
    "CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_title_unique ON sessions(title) WHERE title IS NOT NULL"
)

# Columns each version added, in upstream's order, with the type upstream gave them.
COLUMNS_ADDED: dict[int, tuple[tuple[str, str, str], ...]] = {
    2: (("messages", "finish_reason", "TEXT"),),
    3: (("sessions", "title", "TEXT"),),
    5: (
        ("sessions", "cache_read_tokens", "INTEGER DEFAULT 0"),
        ("sessions", "cache_write_tokens", "INTEGER DEFAULT 0"),
        ("sessions", "reasoning_tokens", "INTEGER DEFAULT 0"),
        ("sessions", "billing_provider", "TEXT"),
        ("sessions", "billing_base_url", "TEXT"),
        ("sessions", "billing_mode", "TEXT"),
        ("sessions", "estimated_cost_usd", "REAL"),
        ("sessions", "actual_cost_usd", "REAL"),
        ("sessions", "cost_status", "TEXT"),
        ("sessions", "cost_source", "TEXT"),
        ("sessions", "pricing_version", "TEXT"),
    ),
    6: (
        ("messages", "reasoning", "TEXT"),
        ("messages", "reasoning_details", "TEXT"),
        ("messages", "codex_reasoning_items", "TEXT"),
    ),
    7: (("messages", "reasoning_content", "TEXT"),),
    8: (("sessions", "api_call_count", "INTEGER DEFAULT 0"),),
    9: (("messages", "codex_message_items", "TEXT"),),
}
COLUMN_TYPES: dict[tuple[str, str], str] = {
    (table, column): ddl_type for additions in COLUMNS_ADDED.values() for table, column, ddl_type in additions
}
VERSION_OF_COLUMN: dict[tuple[str, str], int] = {
    (table, column): version for version, additions in COLUMNS_ADDED.items() for table, column, _ in additions
}


@dataclass
class LegacyDb:
    """What :func:`build_legacy_db` wrote."""

    path: Path
    version: int
    columns: dict[str, list[str]]
    statements: list[str] = field(default_factory=list)
    has_title_index: bool = False


def connect(path: Path | str) -> sqlite3.Connection:
    """A plain autocommit connection, configured the way upstream configured its own."""
    conn = sqlite3.connect(str(path), timeout=1.0, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def columns_of(conn: sqlite3.Connection, table: str) -> list[str]:
    return [str(row[1]) for row in conn.execute(f'PRAGMA table_info("{table}")')]


def build_legacy_db(
    path: Path | str,
    version: int,
    *,
    ragged_missing: Iterable[tuple[str, str]] = (),
    extra_columns: Iterable[tuple[str, str]] = (),
    without_title_index: bool = False,
) -> LegacyDb:
    """Write an empty upstream database at schema ``version`` (1–11) to ``path``.

    ``ragged_missing`` omits columns the version should have; ``extra_columns`` adds
    columns of later versions early (as upstream's reconciliation did);
    ``without_title_index`` leaves out the unique title index of version ≥ 4.
    """
    if not 1 <= version <= 11:
        raise ValueError(f"upstream schema versions are 1..11, not {version}")
    missing = set(ragged_missing)
    extras = list(extra_columns)
    for key in [*missing, *extras]:
        if key not in COLUMN_TYPES:
            raise ValueError(f"{key} is not a column any upstream version added")
    statements: list[str] = [*V1_TABLES, *V1_FTS, "INSERT INTO schema_version (version) VALUES (1)"]
    for step in range(2, version + 1):
        for table, column, ddl_type in COLUMNS_ADDED.get(step, ()):
            if (table, column) not in missing:
                statements.append(f"ALTER TABLE {table} ADD COLUMN {column} {ddl_type}")
        title_present = ("sessions", "title") not in missing
        if step == 4 and not without_title_index and title_present:
            statements.append(TITLE_INDEX)
        if step == 10:
            statements.extend(V10_TRIGRAM)
            statements.append(V10_TRIGRAM_BACKFILL)
        if step == 11:
            statements.extend(V11_DROP_OLD_FTS)
            statements.extend(V11_FTS)
            statements.extend(V11_BACKFILL)
            statements.append(STATE_META)
        statements.append(f"UPDATE schema_version SET version = {step}")
    for table, column in extras:
        if (table, column) in missing or VERSION_OF_COLUMN[(table, column)] > version:
            statements.append(f"ALTER TABLE {table} ADD COLUMN {column} {COLUMN_TYPES[(table, column)]}")
    path = Path(path)
    with closing(connect(path)) as conn:
        for statement in statements:
            conn.execute(statement)
        columns = {table: columns_of(conn, table) for table in ("sessions", "messages")}
        has_index = (
            conn.execute(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'idx_sessions_title_unique'"
            ).fetchone()[0]
            == 1
        )
    return LegacyDb(path, version, columns, statements, has_index)


# --- upstream after version 11 -----------------------------------------------------------


@dataclass(frozen=True)
class LaterStep:
    """What one upstream change added on open, and the schema version files had by then."""

    name: str
    version: int
    statements: tuple[str, ...]


LATER_STEPS: tuple[LaterStep, ...] = (
    LaterStep(
        "handoff",
        11,
        tuple(
            f"ALTER TABLE sessions ADD COLUMN {column} TEXT"
            for column in ("handoff_state", "handoff_platform", "handoff_error")
        ),
    ),
    LaterStep(
        "platform_message_id",
        12,
        (
            "ALTER TABLE messages ADD COLUMN platform_message_id TEXT",
            "CREATE INDEX IF NOT EXISTS idx_messages_platform_msg_id "
            "ON messages(session_id, platform_message_id) WHERE platform_message_id IS NOT NULL",
        ),
    ),
    LaterStep("observed", 13, ("ALTER TABLE messages ADD COLUMN observed INTEGER DEFAULT 0",)),
    LaterStep(
        "compression_locks",
        14,
        (
            "CREATE TABLE IF NOT EXISTS compression_locks (session_id TEXT PRIMARY KEY, "
            "holder TEXT NOT NULL, acquired_at REAL NOT NULL, expires_at REAL NOT NULL)",
            "CREATE INDEX IF NOT EXISTS idx_compression_locks_expires ON compression_locks(expires_at)",
        ),
    ),
    LaterStep("cwd", 14, ("ALTER TABLE sessions ADD COLUMN cwd TEXT",)),
    LaterStep(
        "active",
        14,
        (
            "ALTER TABLE messages ADD COLUMN active INTEGER NOT NULL DEFAULT 1",
            "ALTER TABLE sessions ADD COLUMN rewind_count INTEGER NOT NULL DEFAULT 0",
            "CREATE INDEX IF NOT EXISTS idx_messages_session_active "
            "ON messages(session_id, active, timestamp)",
        ),
    ),
    LaterStep("archived", 14, ("ALTER TABLE sessions ADD COLUMN archived INTEGER NOT NULL DEFAULT 0",)),
    LaterStep(
        "source_id_index", 15, ("CREATE INDEX IF NOT EXISTS idx_sessions_source_id ON sessions(source, id)",)
    ),
    LaterStep("compacted", 16, ("ALTER TABLE messages ADD COLUMN compacted INTEGER NOT NULL DEFAULT 0",)),
    LaterStep(
        "git",
        16,
        (
            "ALTER TABLE sessions ADD COLUMN git_branch TEXT",
            "ALTER TABLE sessions ADD COLUMN git_repo_root TEXT",
        ),
    ),
    LaterStep(
        "gateway_peer",
        17,
        (
            *(
                f"ALTER TABLE sessions ADD COLUMN {column} TEXT"
                for column in ("session_key", "chat_id", "chat_type", "thread_id")
            ),
            "CREATE INDEX IF NOT EXISTS idx_sessions_session_key ON sessions(session_key, started_at DESC)",
            "CREATE INDEX IF NOT EXISTS idx_sessions_gateway_peer "
            "ON sessions(source, user_id, chat_id, chat_type, thread_id, started_at DESC)",
        ),
    ),
    LaterStep(
        "compression_failure",
        17,
        (
            "ALTER TABLE sessions ADD COLUMN compression_failure_cooldown_until REAL",
            "ALTER TABLE sessions ADD COLUMN compression_failure_error TEXT",
        ),
    ),
    LaterStep(
        "handoff_index",
        17,
        ("CREATE INDEX IF NOT EXISTS idx_sessions_handoff_state ON sessions(handoff_state, started_at)",),
    ),
)
"""Upstream's additions after version 11, in the order they landed, each with the version
files were at when it did (changes that came without a bump carry the version of their time)."""

GHOST_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("sessions", "handoff_pending", "INTEGER DEFAULT 0"),
    ("sessions", "icon", "TEXT"),
    ("messages", "anthropic_content_blocks", "TEXT"),
)
"""Columns upstream added and later dropped from its schema: files opened by those builds
keep them (upstream never drops a column)."""

_TOPIC_MODE = """CREATE TABLE IF NOT EXISTS telegram_dm_topic_mode (
    chat_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    enabled INTEGER NOT NULL DEFAULT 1,
    activated_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    has_topics_enabled INTEGER,
    allows_users_to_create_topics INTEGER,
    capability_checked_at REAL,
    intro_message_id TEXT,
    pinned_message_id TEXT
)"""
_TOPIC_BINDINGS = """CREATE TABLE IF NOT EXISTS telegram_dm_topic_bindings (
    chat_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    session_id TEXT NOT NULL REFERENCES sessions(id){on_delete},
    managed_mode TEXT NOT NULL DEFAULT 'auto',
    linked_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (chat_id, thread_id)
)"""


def topic_table_statements(shape: int) -> tuple[str, ...]:
    """Upstream's opt-in Telegram topic tables: ``shape`` 1 (the bindings' foreign key
    without a delete action) or 2 (``ON DELETE CASCADE``), with the ``state_meta`` key."""
    on_delete = " ON DELETE CASCADE" if shape >= 2 else ""
    return (
        _TOPIC_MODE,
        _TOPIC_BINDINGS.format(on_delete=on_delete),
        "CREATE UNIQUE INDEX IF NOT EXISTS idx_telegram_dm_topic_bindings_session "
        "ON telegram_dm_topic_bindings(session_id)",
        "CREATE INDEX IF NOT EXISTS idx_telegram_dm_topic_bindings_user "
        "ON telegram_dm_topic_bindings(user_id, chat_id)",
        "INSERT INTO state_meta (key, value) VALUES ('telegram_dm_topic_schema_version', "
        f"'{shape}') ON CONFLICT(key) DO UPDATE SET value = excluded.value",
    )


def build_upstream_db(
    path: Path | str,
    version: int,
    *,
    missing: Iterable[str] = (),
    ghosts: bool = False,
    topic_tables: int | None = None,
) -> LegacyDb:
    """Write an empty upstream database at schema ``version`` (11–17) to ``path``: a v11
    file plus every :data:`LATER_STEPS` step of that version or earlier, except those
    named in ``missing``; with ``ghosts``, upstream's dropped columns; with
    ``topic_tables`` (1 or 2), the Telegram topic tables in that shape."""
    if not 11 <= version <= 17:
        raise ValueError(f"this builder makes versions 11..17, not {version}")
    left_out = set(missing)
    unknown = left_out - {step.name for step in LATER_STEPS}
    if unknown:
        raise ValueError(f"no later upstream step is called {sorted(unknown)}")
    legacy = build_legacy_db(path, 11)
    statements = [
        statement
        for step in LATER_STEPS
        if step.version <= version and step.name not in left_out
        for statement in step.statements
    ]
    if ghosts:
        statements.extend(
            f"ALTER TABLE {table} ADD COLUMN {column} {ddl}" for table, column, ddl in GHOST_COLUMNS
        )
    if topic_tables is not None:
        statements.extend(topic_table_statements(topic_tables))
    statements.append(f"UPDATE schema_version SET version = {version}")
    with closing(connect(path)) as conn:
        for statement in statements:
            conn.execute(statement)
        columns = {table: columns_of(conn, table) for table in ("sessions", "messages")}
    return LegacyDb(Path(path), version, columns, [*legacy.statements, *statements], legacy.has_title_index)


# --- rows --------------------------------------------------------------------------------


def default_sessions() -> list[dict[str, Any]]:
    """Sessions as upstream callers create them: a parent, a child continuing it, a bare one."""
    return [
        {
            "id": "20260301_101500_ab12cd",
            "source": "cli",
            "user_id": "user-7",
            "model": "anthropic/claude-sonnet-4",
            "model_config": {"temperature": 0.3, "max_tokens": 4096, "persona": "记忆"},
            "system_prompt": "You are Hermes, a helpful agent.\nBe brief.",
            "parent_session_id": None,
            "started_at": 1772360100.123456,
            "ended_at": 1772363700.654321,
            "end_reason": "compression",
            "input_tokens": 15230,
            "output_tokens": 2048,
            "title": "Rotate cluster secrets",
            "cache_read_tokens": 900,
            "cache_write_tokens": 120,
            "reasoning_tokens": 64,
            "billing_provider": "openrouter",
            "billing_base_url": "https://openrouter.ai/api/v1",
            "billing_mode": "official_docs_snapshot",
            "estimated_cost_usd": 0.0421875,
            "actual_cost_usd": 0.04,
            "cost_status": "estimated",
            "cost_source": "provider_models_api",
            "pricing_version": "2026-02-01",
            "api_call_count": 7,
        },
        {
            "id": "20260301_111500_ef34gh",
            "source": "cli",
            "model": "anthropic/claude-sonnet-4",
            "parent_session_id": "20260301_101500_ab12cd",
            "started_at": 1772363700.75,
            "title": "Rotate cluster secrets #2",
            "input_tokens": 300,
            "output_tokens": 80,
        },
        {
            "id": "tg-1772400000",
            "source": "telegram",
            "user_id": "424242",
            "started_at": 1772400000.0,
        },
    ]


def default_messages() -> list[dict[str, Any]]:
    """Messages of :func:`default_sessions`, covering every encoding upstream used."""
    root, child, telegram = (s["id"] for s in default_sessions())
    return [
        {
            "session_id": root,
            "role": "user",
            "content": "How do I rotate the kubernetes secrets in staging?",
            "timestamp": 1772360101.5,
        },
        {
            "session_id": root,
            "role": "assistant",
            "content": "Let me look that up.",
            "tool_calls": [
                {
                    "id": "call_0001",
                    "type": "function",
                    "function": {
                        "name": "web_search",
                        "arguments": json.dumps({"query": "kubectl rotate secret 记忆"}),
                    },
                }
            ],
            "timestamp": 1772360102.25,
            "token_count": 57,
            "finish_reason": "tool_calls",
            "reasoning": "The user wants secret rotation steps.",
            "reasoning_content": "Search first, then answer.",
            "reasoning_details": [{"type": "reasoning.summary", "summary": "plan the search"}],
            "codex_reasoning_items": [{"id": "rs_1", "type": "reasoning", "encrypted_content": "gAAA"}],
            "codex_message_items": [{"id": "msg_1", "phase": "final"}],
        },
        {
            "session_id": root,
            "role": "tool",
            "content": "Secrets are rotated with kubectl create secret --dry-run.",
            "tool_call_id": "call_0001",
            "tool_name": "web_search",
            "timestamp": 1772360103.0,
        },
        {
            "session_id": child,
            "role": "user",
            "content": [
                {"type": "text", "text": "describe this architecture diagram"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
            "timestamp": 1772363701.0,
        },
        {
            "session_id": child,
            "role": "assistant",
            "content": "记忆断裂问题已经解决，图中有三个服务。",
            "timestamp": 1772363702.5,
            "finish_reason": "stop",
        },
        {
            "session_id": telegram,
            "role": "tool",
            "content": None,
            "tool_call_id": "call_0009",
            "tool_name": "terminal",
            "timestamp": 1772400001.0,
        },
    ]


_SESSION_JSON = ("model_config",)
_MESSAGE_JSON = ("tool_calls", "reasoning_details", "codex_reasoning_items", "codex_message_items")


def encode_content(content: Any) -> Any:
    """Message content as upstream stored it: text as is, lists/dicts behind the sentinel."""
    if content is None or isinstance(content, str | bytes | int | float):
        return content
    return CONTENT_JSON_PREFIX + json.dumps(content)


def _encode_json(value: Any) -> Any:
    if isinstance(value, str):
        return value
    return json.dumps(value) if value else None


@dataclass
class Written:
    """The rows :func:`populate` wrote: column → stored value, messages with their ids."""

    sessions: list[dict[str, Any]]
    messages: list[dict[str, Any]]


def populate(
    path: Path | str,
    sessions: Sequence[dict[str, Any]] | None = None,
    messages: Sequence[dict[str, Any]] | None = None,
) -> Written:
    """Write sessions, then messages, into an upstream database as upstream did.

    Values are encoded the upstream way; keys naming columns the file lacks are left out.
    Each appended message bumps its session's ``message_count`` (and ``tool_call_count``
    by its number of tool calls), as upstream's ``append_message`` did.
    """
    sessions = default_sessions() if sessions is None else sessions
    messages = default_messages() if messages is None else messages
    with closing(connect(path)) as conn:
        session_cols = set(columns_of(conn, "sessions"))
        message_cols = set(columns_of(conn, "messages"))
        written_sessions: dict[str, dict[str, Any]] = {}
        conn.execute("BEGIN IMMEDIATE")
        for raw in sessions:
            row = {
                key: _encode_json(value) if key in _SESSION_JSON else value
                for key, value in raw.items()
                if key in session_cols
            }
            names = ", ".join(row)
            marks = ", ".join("?" for _ in row)
            conn.execute(f"INSERT INTO sessions ({names}) VALUES ({marks})", tuple(row.values()))
            stored = conn.execute(
                "SELECT message_count, tool_call_count FROM sessions WHERE id = ?", (row["id"],)
            ).fetchone()
            row["message_count"], row["tool_call_count"] = stored
            written_sessions[row["id"]] = row
        written_messages: list[dict[str, Any]] = []
        for raw in messages:
            row = {}
            for key, value in raw.items():
                if key not in message_cols:
                    continue
                if key == "content":
                    row[key] = encode_content(value)
                elif key in _MESSAGE_JSON:
                    row[key] = _encode_json(value)
                else:
                    row[key] = value
            names = ", ".join(row)
            marks = ", ".join("?" for _ in row)
            cursor = conn.execute(f"INSERT INTO messages ({names}) VALUES ({marks})", tuple(row.values()))
            row["id"] = cursor.lastrowid
            calls = len(raw.get("tool_calls") or [])
            conn.execute(
                "UPDATE sessions SET message_count = message_count + 1, "
                "tool_call_count = tool_call_count + ? WHERE id = ?",
                (calls, row["session_id"]),
            )
            session = written_sessions.get(row["session_id"])
            if session is not None:
                session["message_count"] += 1
                session["tool_call_count"] += calls
            written_messages.append(row)
        conn.execute("COMMIT")
    return Written(list(written_sessions.values()), written_messages)


# --- reading back ------------------------------------------------------------------------


def read_rows(path: Path | str, table: str, key: str = "id") -> dict[Any, dict[str, tuple[str, Any]]]:
    """Every row of ``table`` as ``{key: {column: (sqlite typeof, value)}}``, read raw.

    ``typeof`` makes the comparison byte-exact: a REAL stays REAL, text stays text.
    """
    with closing(sqlite3.connect(str(path))) as conn:
        cols = columns_of(conn, table)
        select = ", ".join(f'typeof("{c}"), "{c}"' for c in cols)
        rows: dict[Any, dict[str, tuple[str, Any]]] = {}
        for raw in conn.execute(f'SELECT {select} FROM "{table}"'):
            row = {c: (raw[2 * i], raw[2 * i + 1]) for i, c in enumerate(cols)}
            rows[row[key][1]] = row
        return rows


def restrict(
    rows: dict[Any, dict[str, tuple[str, Any]]], columns: Iterable[str]
) -> dict[Any, dict[str, tuple[str, Any]]]:
    """The same rows keeping only ``columns`` (those that still exist after a change)."""
    keep = set(columns)
    return {k: {c: v for c, v in row.items() if c in keep} for k, row in rows.items()}


def fts_rowids(path: Path | str, table: str, query: str) -> list[int]:
    """Rowids ``table`` (an FTS5 table) matches for ``query``, ascending."""
    with closing(sqlite3.connect(str(path))) as conn:
        return [
            int(r[0])
            for r in conn.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rowid", (query,))
        ]


def fts_integrity_check(path: Path | str, table: str) -> None:
    """Run FTS5's integrity check on ``table``; raises ``sqlite3.DatabaseError`` if corrupt."""
    with closing(sqlite3.connect(str(path))) as conn:
        conn.execute(f"INSERT INTO {table}({table}, rank) VALUES('integrity-check', 1)")


def schema_versions(path: Path | str) -> list[int]:
    with closing(sqlite3.connect(str(path))) as conn:
        return [int(r[0]) for r in conn.execute("SELECT version FROM schema_version")]


def alembic_versions(path: Path | str) -> list[str] | None:
    """Rows of ``alembic_version``, or ``None`` when the table does not exist."""
    with closing(sqlite3.connect(str(path))) as conn:
        exists = conn.execute(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
        ).fetchone()[0]
        if not exists:
            return None
        return [str(r[0]) for r in conn.execute("SELECT version_num FROM alembic_version")]


def master(path: Path | str) -> dict[tuple[str, str], str]:
    """``sqlite_master`` as ``{(type, name): sql}`` (``''`` for objects without SQL)."""
    with closing(sqlite3.connect(str(path))) as conn:
        return {
            (str(t), str(n)): str(s or "")
            for t, n, s in conn.execute("SELECT type, name, sql FROM sqlite_master")
        }
