"""PostgreSQL only: each message's CJK grams stored in a column, kept by the trigger.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02

Why: a search for a short CJK term next to another term (``roth 如果``) intersects the
gram index of revision 0012 with ``pg_trgm``'s. ``pg_trgm`` is lossy, so PostgreSQL
rechecks every candidate of the intersection against all of its index conditions, and
0012's condition is an expression: ``hermes_cjk_grams`` ran again on each candidate's
text, about 640 µs for a CJK message. At a million messages such a search took up to
0.8 s (``CHANGELOG.md``, 2026-12-03). With the grams stored, a recheck reads an array.

What it adds, on PostgreSQL only:

* ``messages.cjk_grams text[]``: ``hermes_cjk_grams`` of the indexed text, or NULL when
  the text has no CJK character (most messages: they cost neither space nor an index
  entry, and no gram condition can match them);
* the trigger function of revision 0012 (``hermes_messages_search_vector``) sets it
  beside ``search_vector`` on every insert and every change of the indexed text — the
  running release's writes included, from the moment this step commits;
* ``idx_messages_stored_cjk_grams``, a GIN index over the column, partial (``WHERE
  cjk_grams IS NOT NULL``): a gram condition implies it.

Online, in 0012's pattern (``docs/postgresql.md``, "Online migrations"): the column is
added nullable (a catalog change), the trigger function is replaced, the messages already
there that hold CJK text are filled in batches of ids, each its own transaction (a killed
run resumes at the first CJK message still missing its grams), and the index is built
``CONCURRENTLY``. Revision 0012's expression index ``idx_messages_cjk_grams`` stays: the
previous release's searches still use it. A later revision drops it once no release that
reads it runs.

On SQLite this revision changes nothing; only ``alembic_version`` moves to 0015.
"""

from __future__ import annotations

from alembic import context

from hermes_store.schema.migration_ops import (
    analyze,
    backfill,
    create_index_concurrently,
    dialect_name,
    drop_index_concurrently,
    execute_with_lock_retry,
    outside_transaction,
)

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

INDEXED_TEXT = "COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, '')"
NEW_INDEXED_TEXT = (
    "COALESCE(NEW.content, '') || ' ' || COALESCE(NEW.tool_name, '') || ' ' || COALESCE(NEW.tool_calls, '')"
)

STORED_GRAMS = f"NULLIF(hermes_cjk_grams({INDEXED_TEXT}), '{{}}'::text[])"
"""A message's stored grams: NULL for a text without CJK characters."""

CREATE_TRIGGER_FUNCTION = f"""CREATE OR REPLACE FUNCTION hermes_messages_search_vector() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.search_vector := hermes_search_vector(NEW.content, NEW.tool_name, NEW.tool_calls);
    NEW.cjk_grams := NULLIF(hermes_cjk_grams({NEW_INDEXED_TEXT}), '{{}}'::text[]);
    RETURN NEW;
END
$$"""

INDEX_NAME = "idx_messages_stored_cjk_grams"
CREATE_INDEX = (
    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX_NAME} ON messages USING gin (cjk_grams) "
    "WHERE cjk_grams IS NOT NULL"
)


def _previous_trigger_function() -> str:
    """Revision 0012's trigger function, as 0012 creates it (restored on downgrade)."""
    script = context.script.get_revision("0012")
    assert script is not None
    return str(script.module.CREATE_TRIGGER_FUNCTION)


def upgrade() -> None:
    if dialect_name() != "postgresql":
        return
    with outside_transaction():
        execute_with_lock_retry("ALTER TABLE messages ADD COLUMN IF NOT EXISTS cjk_grams text[]")
        # The trigger first: every row written from now on has its grams, so the backfill
        # only has to reach the rows that were there before.
        execute_with_lock_retry(CREATE_TRIGGER_FUNCTION)
        backfill(
            "CJK grams",
            "messages",
            f"cjk_grams = {STORED_GRAMS}",
            f"cjk_grams IS NULL AND {STORED_GRAMS} IS NOT NULL",
        )
        create_index_concurrently(INDEX_NAME, CREATE_INDEX)
        analyze("messages")


def downgrade() -> None:
    if dialect_name() != "postgresql":
        return
    with outside_transaction():
        execute_with_lock_retry(_previous_trigger_function())
        drop_index_concurrently(INDEX_NAME)
        execute_with_lock_retry("ALTER TABLE messages DROP COLUMN IF EXISTS cjk_grams")
