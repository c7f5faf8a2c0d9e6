"""Initial schema: sessions, messages, schema_version and the word FTS index.

Revision ID: 0001
Revises:
Create Date: 2026-02-19

Why: upstream Hermes' first state.db (schema version 1) replaced per-session JSONL files
with SQLite. The FTS5 table was external-content over ``messages.content``, kept in step
by triggers that delete through the FTS5 ``'delete'`` command; revision 0011 replaces it.
``state_meta`` arrived upstream later without a version bump; it is created here (if
missing) so that every database has it from the first revision.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from hermes_store.schema.migration_ops import (
    add_columns_if_missing,
    dialect_name,
    execute_all,
    is_offline,
    squawk_ignore,
    table_names,
)

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Frozen upstream v1 DDL for SQLite (IF NOT EXISTS keeps it idempotent on legacy files).
SQLITE_UPGRADE = (
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
    """CREATE TABLE IF NOT EXISTS state_meta (
    key TEXT PRIMARY KEY,
    value TEXT
)""",
    "CREATE INDEX IF NOT EXISTS idx_sessions_source ON sessions(source)",
    "CREATE INDEX IF NOT EXISTS idx_sessions_parent ON sessions(parent_session_id)",
    "CREATE INDEX IF NOT EXISTS idx_sessions_started ON sessions(started_at DESC)",
    "CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, timestamp)",
    """CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    content,
    content=messages,
    content_rowid=id
)""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
        VALUES('delete', old.id, old.content);
END""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_update AFTER UPDATE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
        VALUES('delete', old.id, old.content);
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END""",
)

SQLITE_DOWNGRADE = (
    "DROP TRIGGER IF EXISTS messages_fts_insert",
    "DROP TRIGGER IF EXISTS messages_fts_delete",
    "DROP TRIGGER IF EXISTS messages_fts_update",
    "DROP TABLE IF EXISTS messages_fts",
    "DROP INDEX IF EXISTS idx_messages_session",
    "DROP INDEX IF EXISTS idx_sessions_started",
    "DROP INDEX IF EXISTS idx_sessions_parent",
    "DROP INDEX IF EXISTS idx_sessions_source",
    "DROP TABLE IF EXISTS messages",
    "DROP TABLE IF EXISTS sessions",
    "DROP TABLE IF EXISTS state_meta",
    "DROP TABLE IF EXISTS schema_version",
)

# Epoch seconds need double precision on PostgreSQL (its REAL is 4 bytes).
EPOCH = sa.REAL().with_variant(postgresql.DOUBLE_PRECISION(), "postgresql")


def _zero() -> sa.TextClause:
    return sa.text("0")


def _server_upgrade() -> None:
    # Every table and index below is created here, on an empty database: no lock is at
    # stake. The column types are upstream's v1 schema (hermes_state), which the models,
    # the previous release and ``hermes-store copy`` share: INTEGER counters and the
    # SERIAL message id (32-bit: two billion messages) stay as they are.
    squawk_ignore("prefer-bigint-over-int, prefer-identity", "upstream's v1 column types, kept")
    present = table_names()
    if "schema_version" not in present:
        op.create_table("schema_version", sa.Column("version", sa.Integer(), nullable=False))
    if "sessions" not in present:
        op.create_table(
            "sessions",
            sa.Column("id", sa.Text(), primary_key=True),
            sa.Column("source", sa.Text(), nullable=False),
            sa.Column("user_id", sa.Text()),
            sa.Column("model", sa.Text()),
            sa.Column("model_config", sa.Text()),
            sa.Column("system_prompt", sa.Text()),
            sa.Column("parent_session_id", sa.Text()),
            sa.Column("started_at", EPOCH, nullable=False),
            sa.Column("ended_at", EPOCH),
            sa.Column("end_reason", sa.Text()),
            sa.Column("message_count", sa.Integer(), server_default=_zero()),
            sa.Column("tool_call_count", sa.Integer(), server_default=_zero()),
            sa.Column("input_tokens", sa.Integer(), server_default=_zero()),
            sa.Column("output_tokens", sa.Integer(), server_default=_zero()),
            sa.ForeignKeyConstraint(
                ["parent_session_id"], ["sessions.id"], name="fk_sessions_parent_session_id_sessions"
            ),
            sa.PrimaryKeyConstraint("id", name="pk_sessions"),
        )
        op.create_index("idx_sessions_source", "sessions", ["source"])
        op.create_index("idx_sessions_parent", "sessions", ["parent_session_id"])
        op.create_index("idx_sessions_started", "sessions", [sa.text("started_at DESC")])
    if "messages" not in present:
        op.create_table(
            "messages",
            sa.Column("id", sa.Integer(), autoincrement=True),
            sa.Column("session_id", sa.Text(), nullable=False),
            sa.Column("role", sa.Text(), nullable=False),
            sa.Column("content", sa.Text()),
            sa.Column("tool_call_id", sa.Text()),
            sa.Column("tool_calls", sa.Text()),
            sa.Column("tool_name", sa.Text()),
            sa.Column("timestamp", EPOCH, nullable=False),
            sa.Column("token_count", sa.Integer()),
            sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], name="fk_messages_session_id_sessions"),
            sa.PrimaryKeyConstraint("id", name="pk_messages"),
        )
        op.create_index("idx_messages_session", "messages", ["session_id", "timestamp"])
    if "state_meta" not in present:
        op.create_table(
            "state_meta",
            sa.Column("key", sa.Text()),
            sa.Column("value", sa.Text()),
            sa.PrimaryKeyConstraint("key", name="pk_state_meta"),
        )


def _v1_columns_legacy_files_can_lack() -> dict[str, list[sa.Column[object]]]:
    # Hand-made or half-migrated upstream files can lack even version-1 columns (upstream
    # added any missing column on every open). SQLite cannot add a NOT NULL column without
    # a default, so those few are added nullable, as upstream's reconciliation left them.
    return {
        "sessions": [
            sa.Column("source", sa.Text()),
            sa.Column("user_id", sa.Text()),
            sa.Column("model", sa.Text()),
            sa.Column("model_config", sa.Text()),
            sa.Column("system_prompt", sa.Text()),
            sa.Column("parent_session_id", sa.Text()),
            sa.Column("started_at", sa.REAL()),
            sa.Column("ended_at", sa.REAL()),
            sa.Column("end_reason", sa.Text()),
            sa.Column("message_count", sa.Integer(), server_default=_zero()),
            sa.Column("tool_call_count", sa.Integer(), server_default=_zero()),
            sa.Column("input_tokens", sa.Integer(), server_default=_zero()),
            sa.Column("output_tokens", sa.Integer(), server_default=_zero()),
        ],
        "messages": [
            sa.Column("session_id", sa.Text()),
            sa.Column("role", sa.Text()),
            sa.Column("content", sa.Text()),
            sa.Column("tool_call_id", sa.Text()),
            sa.Column("tool_calls", sa.Text()),
            sa.Column("tool_name", sa.Text()),
            sa.Column("timestamp", sa.REAL()),
            sa.Column("token_count", sa.Integer()),
        ],
    }


def upgrade() -> None:
    if dialect_name() == "sqlite":
        execute_all(SQLITE_UPGRADE)
        if is_offline():
            # A --sql script runs on a database it creates here: the CREATE TABLEs above
            # made every v1 column, and there is no legacy file to reconcile.
            return
        for table, columns in _v1_columns_legacy_files_can_lack().items():
            add_columns_if_missing(table, columns)
    else:
        _server_upgrade()


def downgrade() -> None:
    if dialect_name() == "sqlite":
        execute_all(SQLITE_DOWNGRADE)
        return
    for table in ("messages", "sessions", "state_meta", "schema_version"):
        op.drop_table(table)
