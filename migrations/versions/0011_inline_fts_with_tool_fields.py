"""Re-index both FTS5 tables inline over content + tool name + tool-call JSON.

Revision ID: 0011
Revises: 0010
Create Date: 2026-04-28

Why: searches for a tool name or an argument inside a tool call found nothing, because
the external-content indexes covered ``content`` only. Upstream v11 (8d76d69d) switched
both indexes to inline tables fed with ``content || ' ' || tool_name || ' ' || tool_calls``
and fixed the delete triggers: in inline mode the FTS5 ``'delete'`` command raised "SQL
logic error", so rows are removed by rowid. Every message is backfilled by one
INSERT … SELECT per index, which SQLite streams without loading rows into Python.
The downgrade restores the v10 external-content indexes and rebuilds them.
On PostgreSQL the same text is indexed by PostgreSQL's own means: a GIN index over its
``tsvector`` (the ``simple`` configuration, which does not stem, like unicode61) and a
``pg_trgm`` GIN index for CJK and substring search; no triggers are needed. Both are built
``CONCURRENTLY``, so the running release keeps writing while they build (an index a killed
build left INVALID is rebuilt by the next run).
"""

from __future__ import annotations

from hermes_store.schema.migration_ops import (
    create_index_concurrently,
    dialect_name,
    drop_index_concurrently,
    execute_all,
    execute_with_lock_retry,
    outside_transaction,
)

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

DROP_ALL = (
    "DROP TRIGGER IF EXISTS messages_fts_insert",
    "DROP TRIGGER IF EXISTS messages_fts_delete",
    "DROP TRIGGER IF EXISTS messages_fts_update",
    "DROP TRIGGER IF EXISTS messages_fts_trigram_insert",
    "DROP TRIGGER IF EXISTS messages_fts_trigram_delete",
    "DROP TRIGGER IF EXISTS messages_fts_trigram_update",
    "DROP TABLE IF EXISTS messages_fts",
    "DROP TABLE IF EXISTS messages_fts_trigram",
)

V11_CREATE = (
    """CREATE TABLE IF NOT EXISTS state_meta (
    key TEXT PRIMARY KEY,
    value TEXT
)""",
    """CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    content
)""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (
        new.id,
        COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' ' || COALESCE(new.tool_calls, '')
    );
END""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
END""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_update AFTER UPDATE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
    INSERT INTO messages_fts(rowid, content) VALUES (
        new.id,
        COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' ' || COALESCE(new.tool_calls, '')
    );
END""",
    """CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts_trigram USING fts5(
    content,
    tokenize='trigram'
)""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts_trigram(rowid, content) VALUES (
        new.id,
        COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' ' || COALESCE(new.tool_calls, '')
    );
END""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts_trigram WHERE rowid = old.id;
END""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_update AFTER UPDATE ON messages BEGIN
    DELETE FROM messages_fts_trigram WHERE rowid = old.id;
    INSERT INTO messages_fts_trigram(rowid, content) VALUES (
        new.id,
        COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' ' || COALESCE(new.tool_calls, '')
    );
END""",
    """INSERT INTO messages_fts(rowid, content)
    SELECT id, COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, '')
    FROM messages""",
    """INSERT INTO messages_fts_trigram(rowid, content)
    SELECT id, COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, '')
    FROM messages""",
)

# The v10 state: both indexes external-content over messages.content.
V10_CREATE = (
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
    """CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts_trigram USING fts5(
    content,
    content=messages,
    content_rowid=id,
    tokenize='trigram'
)""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts_trigram(rowid, content) VALUES (new.id, new.content);
END""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content)
        VALUES('delete', old.id, old.content);
END""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_update AFTER UPDATE ON messages BEGIN
    INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content)
        VALUES('delete', old.id, old.content);
    INSERT INTO messages_fts_trigram(rowid, content) VALUES (new.id, new.content);
END""",
    "INSERT INTO messages_fts(messages_fts) VALUES('rebuild')",
    "INSERT INTO messages_fts_trigram(messages_fts_trigram) VALUES('rebuild')",
)


INDEXED_TEXT = "(COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, ''))"
POSTGRES_EXTENSION = "CREATE EXTENSION IF NOT EXISTS pg_trgm"
POSTGRES_INDEXES = (
    (
        "idx_messages_fts",
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_fts ON messages USING gin "
        f"(to_tsvector('simple'::regconfig, {INDEXED_TEXT}))",
    ),
    (
        "idx_messages_trgm",
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_trgm ON messages USING gin "
        f"({INDEXED_TEXT} gin_trgm_ops)",
    ),
)


def upgrade() -> None:
    if dialect_name() == "sqlite":
        execute_all(DROP_ALL + V11_CREATE)
    elif dialect_name() == "postgresql":
        with outside_transaction():
            execute_with_lock_retry(POSTGRES_EXTENSION)
            for name, statement in POSTGRES_INDEXES:
                create_index_concurrently(name, statement)


def downgrade() -> None:
    if dialect_name() == "sqlite":
        execute_all(DROP_ALL + V10_CREATE)
    elif dialect_name() == "postgresql":
        with outside_transaction():
            drop_index_concurrently("idx_messages_trgm")
            drop_index_concurrently("idx_messages_fts")
