"""PostgreSQL only: drop revision 0012's expression index of CJK grams, which nothing reads.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06

Why: ``idx_messages_cjk_grams`` is a GIN index over ``hermes_cjk_grams(text)`` computed
from each message's text. Search read it only on a database below revision 0015; from
0015 the trigger stores the same grams in ``messages.cjk_grams``, searched through
``idx_messages_cjk_grams_bucket`` (revision 0018). Every runnable release serves from
revision 0019 (``OLDEST_RUNNABLE_REVISION``) and so never writes a condition on the
expression, yet every insert still computed it and every copy built the index — the
second most costly build of a copy after the trigram index (``docs/postgresql.md``,
"Storage per message").

What it changes, on PostgreSQL only: ``DROP INDEX CONCURRENTLY IF EXISTS
idx_messages_cjk_grams`` outside a transaction. The function ``hermes_cjk_grams`` stays:
the trigger that fills ``cjk_grams`` calls it.

Online: ``DROP INDEX CONCURRENTLY`` takes ``SHARE UPDATE EXCLUSIVE`` on ``messages``,
which no reader or writer conflicts with, and waits for transactions that may still use
the index; a run killed at any point is finished by the next (``IF EXISTS``; a drop
killed half-way leaves an invalid index the next drop removes). The previous release
(revision 0019's) keeps working on a database at 0020: it never reads the index.

The downgrade builds the index again ``CONCURRENTLY``, as revision 0012 defined it.

On SQLite this revision changes nothing; only ``alembic_version`` moves to 0020.
"""

from __future__ import annotations

from hermes_store.schema.migration_ops import (
    analyze,
    create_index_concurrently,
    dialect_name,
    drop_index_concurrently,
    outside_transaction,
)

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

INDEX = "idx_messages_cjk_grams"
INDEXED_TEXT = "(COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, ''))"
"""Revision 0012's indexed text (frozen here: the downgrade must rebuild the same index)."""


def upgrade() -> None:
    if dialect_name() != "postgresql":
        return
    with outside_transaction():
        drop_index_concurrently(INDEX)


def downgrade() -> None:
    if dialect_name() != "postgresql":
        return
    with outside_transaction():
        create_index_concurrently(
            INDEX,
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX} ON messages USING gin "
            f"(hermes_cjk_grams({INDEXED_TEXT}))",
        )
        analyze("messages")
