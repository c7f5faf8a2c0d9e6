"""PostgreSQL only: a trigger-kept tsvector, a CJK gram index and a (session, id) index.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-30

Why: at a hundred thousand messages PostgreSQL's word search was 20–60× slower than
SQLite's. The GIN index of revision 0011 found the rows, but ranking and snippets
recomputed ``to_tsvector`` of every match; two-character CJK terms could not use the
trigram index at all and scanned ``messages``; the context lookup walked whole sessions.

What it adds, on PostgreSQL only:

* ``messages.search_vector``, the ``tsvector`` of the text revision 0011 indexed (its
  first :data:`SEARCH_VECTOR_CHARS` characters, so no message passes PostgreSQL's 1 MB
  ``tsvector`` limit), kept by the trigger ``messages_search_vector`` and GIN-indexed by
  ``idx_messages_search_vector``, which replaces 0011's expression index
  ``idx_messages_fts`` (ranking reads the stored vector);
* ``hermes_cjk_grams(text)``, an immutable function returning every CJK character and
  every pair of adjacent CJK characters of a text, and the GIN index
  ``idx_messages_cjk_grams`` over it, so one- and two-character CJK terms (too short for
  ``pg_trgm``) are found through an index;
* ``idx_messages_session_id`` on ``(session_id, id)`` for the context lookup
  (the previous and next message of a hit).

Online: the running release keeps reading and writing throughout
(``docs/postgresql.md``, "Online migrations"). The column is added nullable (no table
rewrite), the trigger fills it for every row written from then on, existing rows are
filled in batches of a few thousand ids, each its own transaction, and every index is
built ``CONCURRENTLY``; 0011's word index is dropped last, once the new one serves.
Each step is idempotent, so an upgrade killed at any point is completed by the next run
(an index a killed build left INVALID is rebuilt). A first version of this revision
added a STORED generated column instead; revision 0013 converts such databases.

On SQLite this revision changes nothing: the file keeps upstream's v11 schema and
``schema_version`` 11, so upstream Hermes still reads it. Only ``alembic_version`` moves
to 0012. See ``docs/postgresql.md`` ("Revisions one backend needs").
"""

from __future__ import annotations

from hermes_store.schema.migration_ops import (
    analyze,
    backfill,
    create_index_concurrently,
    dialect_name,
    drop_index_concurrently,
    execute_with_lock_retry,
    outside_transaction,
)

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

INDEXED_TEXT = "(COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, ''))"

# The CJK blocks of hermes_store.search.cjk as they stood at this revision (frozen).
CJK_CLASS = (
    "[\\u1100-\\u11FF\\u3000-\\u303F\\u3040-\\u309F\\u30A0-\\u30FF\\u3130-\\u318F\\u3400-\\u4DBF"
    "\\u4E00-\\u9FFF\\uA960-\\uA97F\\uAC00-\\uD7AF\\uD7B0-\\uD7FF\\uF900-\\uFAFF\\uFF65-\\uFF9F"
    "\\U00020000-\\U0002A6DF\\U0002A700-\\U0002EE5F\\U0002F800-\\U0002FA1F\\U00030000-\\U000323AF]"
)

CREATE_GRAMS_FUNCTION = f"""CREATE OR REPLACE FUNCTION hermes_cjk_grams(doc text) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT CASE WHEN doc !~ '{CJK_CLASS}' THEN '{{}}'::text[] ELSE ARRAY(
    SELECT DISTINCT substr(run.chars, i, width)
    FROM regexp_matches(doc, '{CJK_CLASS}+', 'g') AS found(parts),
         LATERAL (SELECT found.parts[1] AS chars) AS run,
         LATERAL generate_series(1, char_length(run.chars)) AS i,
         (VALUES (1), (2)) AS widths(width)
    WHERE i + width - 1 <= char_length(run.chars)
) END
$$"""

SEARCH_VECTOR_CHARS = 100_000
"""The word index covers this many first characters of a message's indexed text.

PostgreSQL refuses a ``tsvector`` whose lexemes and positions pass 1 MB (1,048,575 bytes;
SQLSTATE 54000). A lexeme costs its UTF-8 bytes plus at most 1 byte of alignment and
2 bytes of position count, and each occurrence 2 bytes of position. A character is at most
4 bytes and lies in at most two lexemes (a hyphenated word and its part, a URL and its host
or path), so the worst text costs about 8 bytes a character: 100,000 characters stay under
800,000 bytes (hyphenated pairs of 4-byte CJK characters, the worst case measured, cost
7.5 bytes a character). Substring and CJK search still read the whole text.
"""

CREATE_VECTOR_FUNCTION = f"""CREATE OR REPLACE FUNCTION hermes_search_vector(
    content text, tool_name text, tool_calls text
) RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT to_tsvector('simple'::regconfig, left(
    COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, ''),
    {SEARCH_VECTOR_CHARS}
))
$$"""

CREATE_TRIGGER_FUNCTION = """CREATE OR REPLACE FUNCTION hermes_messages_search_vector() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.search_vector := hermes_search_vector(NEW.content, NEW.tool_name, NEW.tool_calls);
    RETURN NEW;
END
$$"""

CREATE_TRIGGER = (
    "CREATE TRIGGER messages_search_vector BEFORE INSERT OR UPDATE OF content, tool_name, tool_calls "
    "ON messages FOR EACH ROW EXECUTE FUNCTION hermes_messages_search_vector()"
)

# CREATE TRIGGER has no IF NOT EXISTS before PostgreSQL 14; the catalog is asked instead.
ENSURE_TRIGGER = f"""DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_trigger
        WHERE tgrelid = 'messages'::regclass AND tgname = 'messages_search_vector'
    ) THEN
        {CREATE_TRIGGER};
    END IF;
END
$$"""

FTS_INDEX = (
    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_fts ON messages USING gin "
    f"(to_tsvector('simple'::regconfig, {INDEXED_TEXT}))"
)
NEW_INDEXES = (
    (
        "idx_messages_search_vector",
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_search_vector ON messages "
        "USING gin (search_vector)",
    ),
    (
        "idx_messages_cjk_grams",
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_cjk_grams ON messages USING gin "
        f"(hermes_cjk_grams({INDEXED_TEXT}))",
    ),
    (
        "idx_messages_session_id",
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_session_id ON messages (session_id, id)",
    ),
)


def ensure_search_vector_trigger() -> None:
    """The vector functions and the trigger that keeps ``search_vector`` (idempotent)."""
    execute_with_lock_retry(CREATE_VECTOR_FUNCTION)
    execute_with_lock_retry(CREATE_TRIGGER_FUNCTION)
    execute_with_lock_retry(ENSURE_TRIGGER)


def upgrade() -> None:
    if dialect_name() != "postgresql":
        return
    with outside_transaction():
        # Nullable, no default: a catalog change, no table rewrite.
        execute_with_lock_retry("ALTER TABLE messages ADD COLUMN IF NOT EXISTS search_vector tsvector")
        # The trigger first: every row written from now on has its vector, so the
        # backfill below only has to reach the rows that were there before.
        ensure_search_vector_trigger()
        backfill(
            "search vectors",
            "messages",
            "search_vector = hermes_search_vector(content, tool_name, tool_calls)",
            "search_vector IS NULL",
        )
        name, statement = NEW_INDEXES[0]
        create_index_concurrently(name, statement)
        execute_with_lock_retry(CREATE_GRAMS_FUNCTION)
        for name, statement in NEW_INDEXES[1:]:
            create_index_concurrently(name, statement)
        # 0011's word index served the running release's searches until now.
        drop_index_concurrently("idx_messages_fts")
        # Fresh statistics, so the planner uses the new indexes on the first search.
        analyze("messages")


def downgrade() -> None:
    if dialect_name() != "postgresql":
        return
    with outside_transaction():
        drop_index_concurrently("idx_messages_session_id")
        drop_index_concurrently("idx_messages_cjk_grams")
        execute_with_lock_retry("DROP FUNCTION IF EXISTS hermes_cjk_grams(text)")
        # Revision 0011's expression index, as 0011 creates it.
        create_index_concurrently("idx_messages_fts", FTS_INDEX)
        drop_index_concurrently("idx_messages_search_vector")
        execute_with_lock_retry("DROP TRIGGER IF EXISTS messages_search_vector ON messages")
        execute_with_lock_retry("ALTER TABLE messages DROP COLUMN IF EXISTS search_vector")
        execute_with_lock_retry("DROP FUNCTION IF EXISTS hermes_messages_search_vector()")
        execute_with_lock_retry("DROP FUNCTION IF EXISTS hermes_search_vector(text, text, text)")
