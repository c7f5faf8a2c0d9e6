"""PostgreSQL only: a database built by the first 0012 gets the trigger-kept search vector.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02

Why: the first version of revision 0012 (never released) added ``messages.search_vector``
as a STORED generated column, which rewrites the whole table under an ACCESS EXCLUSIVE
lock. Revision 0012 now adds a plain column kept by a trigger and filled in batches
(``docs/postgresql.md``, "Online migrations"). A database upgraded by the first 0012 is
converted here to exactly that schema: the generation expression is dropped (a catalog
change; the vectors already stored are kept) and 0012's vector functions and trigger are
created. On a database 0012 built as it is now, and on SQLite, this changes nothing.
Both steps are one statement under the short lock timeout, retried with backoff.
Vectors the first 0012 stored are of the whole text; messages longer than 0012's
``SEARCH_VECTOR_CHARS`` keep them until their text changes.
"""

from __future__ import annotations

from alembic import context

from hermes_store.schema.migration_ops import (
    dialect_name,
    execute_with_lock_retry,
    outside_transaction,
)

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def _revision_0012() -> object:
    """Revision 0012's module, which holds the function and trigger DDL (kept in one place)."""
    script = context.script.get_revision("0012")
    assert script is not None
    return script.module


def _convert_generated_column(create_trigger: str) -> str:
    # One statement: no row can be written between the expression's drop and the trigger.
    return f"""DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM pg_attribute
        WHERE attrelid = 'messages'::regclass AND attname = 'search_vector' AND attgenerated = 's'
    ) THEN
        ALTER TABLE messages ALTER COLUMN search_vector DROP EXPRESSION;
        {create_trigger};
    END IF;
END
$$"""


def upgrade() -> None:
    if dialect_name() != "postgresql":
        return
    r0012 = _revision_0012()
    with outside_transaction():
        execute_with_lock_retry(r0012.CREATE_VECTOR_FUNCTION)  # type: ignore[attr-defined]
        execute_with_lock_retry(r0012.CREATE_TRIGGER_FUNCTION)  # type: ignore[attr-defined]
        execute_with_lock_retry(_convert_generated_column(r0012.CREATE_TRIGGER))  # type: ignore[attr-defined]


def downgrade() -> None:
    # 0012's schema is the converted one: nothing to undo.
    pass
