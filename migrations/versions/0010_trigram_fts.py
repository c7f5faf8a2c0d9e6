"""Trigram FTS5 index for CJK and substring search.

Revision ID: 0010
Revises: 0009
Create Date: 2026-04-28

Why: unicode61 does not split CJK text into words, so Chinese/Japanese/Korean queries
found nothing. Upstream v10 (1fa76607) added ``messages_fts_trigram`` as an
external-content index over ``messages.content`` and backfilled it. Frozen here as it
stood at v10; revision 0011 rebuilds it inline. The backfill is FTS5's own ``rebuild``,
which streams from the content table inside SQLite, so memory does not grow with the
database. SQLite only: PostgreSQL's trigram search arrives with revision 0011.
"""

from __future__ import annotations

from hermes_store.schema.migration_ops import dialect_name, execute_all, table_names

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

CREATE = (
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
)
BACKFILL = ("INSERT INTO messages_fts_trigram(messages_fts_trigram) VALUES('rebuild')",)
DROP = (
    "DROP TRIGGER IF EXISTS messages_fts_trigram_insert",
    "DROP TRIGGER IF EXISTS messages_fts_trigram_delete",
    "DROP TRIGGER IF EXISTS messages_fts_trigram_update",
    "DROP TABLE IF EXISTS messages_fts_trigram",
)


def upgrade() -> None:
    if dialect_name() != "sqlite":
        return
    if "messages_fts_trigram" in table_names():
        return  # a ragged legacy file already has it; 0011 rebuilds it anyway
    execute_all(CREATE + BACKFILL)


def downgrade() -> None:
    if dialect_name() == "sqlite":
        execute_all(DROP)
