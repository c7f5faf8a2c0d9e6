"""PostgreSQL only: word search tokenizes as SQLite's unicode61 does.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02

Why: ``messages.search_vector`` held PostgreSQL's ``to_tsvector('simple', ...)``, whose
parser cuts words where SQLite's FTS5 does not (``my.app_config.ts`` is one word there,
four in unicode61; ``café`` is not ``cafe``), so the same word query found different
messages on the two backends (``docs/search.md``, "PostgreSQL").

What it changes, on PostgreSQL only:

* ``hermes_unicode61_vector(text)``, unicode61 (``remove_diacritics 1``) written in SQL
  and its word folding ``hermes_unicode61_vector_fold(text)``
  (:func:`hermes_store.search.unicode61.postgres_vector_functions`, built from the table
  SQLite itself gave, ``hermes_store/search/unicode61_data.py``);
* ``hermes_search_vector(content, tool_name, tool_calls)``, which the trigger of revision
  0012 calls for every written row, now returns that vector of the same text (its first
  ``SEARCH_VECTOR_CHARS`` characters): from this step on every writer — the running
  release included — stores the new vectors;
* every existing row's vector is rewritten, in batches of ids, each batch with its
  progress record (``hermes_backfill_progress``) in one transaction.

Online: two function replacements (no table lock), then batched updates; a killed
upgrade resumes after the last batch that committed. The tokenizer data is part of this
revision: a change to it needs a new revision that rewrites the vectors again.

On SQLite this revision changes nothing (FTS5 is unicode61 already); only
``alembic_version`` moves to 0014.
"""

from __future__ import annotations

from alembic import context

from hermes_store.schema.migration_ops import (
    analyze,
    dialect_name,
    execute_with_lock_retry,
    forget_rewrite,
    in_store_schema,
    outside_transaction,
    rewrite_all,
)
from hermes_store.search.unicode61 import postgres_vector_functions

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

SEARCH_VECTOR_CHARS = 100_000
"""As in revision 0012: the vector covers this many first characters of the indexed text."""

UNICODE61_VECTOR = "hermes_unicode61_vector"

CREATE_VECTOR_FUNCTION = f"""CREATE OR REPLACE FUNCTION hermes_search_vector(
    content text, tool_name text, tool_calls text
) RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT {UNICODE61_VECTOR}(left(
    COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, ''),
    {SEARCH_VECTOR_CHARS}
))
$$"""

REWRITE = "search_vector = hermes_search_vector(content, tool_name, tool_calls)"
UPGRADE_STEP = "0014 unicode61 search vectors"
DOWNGRADE_STEP = "0014 downgrade: simple search vectors"


def _previous_vector_function() -> str:
    """Revision 0012's vector function, as 0012 creates it (restored on downgrade)."""
    script = context.script.get_revision("0012")
    assert script is not None
    return str(script.module.CREATE_VECTOR_FUNCTION)


def upgrade() -> None:
    if dialect_name() != "postgresql":
        return
    with outside_transaction():
        for statement in postgres_vector_functions(UNICODE61_VECTOR):
            execute_with_lock_retry(statement)
        execute_with_lock_retry(CREATE_VECTOR_FUNCTION)
        forget_rewrite(DOWNGRADE_STEP)
        rewrite_all(UPGRADE_STEP, "messages", REWRITE)
        analyze("messages")


def downgrade() -> None:
    if dialect_name() != "postgresql":
        return
    with outside_transaction():
        execute_with_lock_retry(_previous_vector_function())
        forget_rewrite(UPGRADE_STEP)
        rewrite_all(DOWNGRADE_STEP, "messages", REWRITE)
        for function in (UNICODE61_VECTOR, f"{UNICODE61_VECTOR}_fold"):
            execute_with_lock_retry(f"DROP FUNCTION IF EXISTS {in_store_schema(function)}(text)")
        analyze("messages")
