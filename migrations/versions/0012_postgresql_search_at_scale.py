"""PostgreSQL only: a stored tsvector, a CJK gram index and a (session, id) index.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-30

Why: at a hundred thousand messages PostgreSQL's word search was 20–60× slower than
SQLite's. The GIN index of revision 0011 found the rows, but ranking and snippets
recomputed ``to_tsvector`` of every match; two-character CJK terms could not use the
trigram index at all and scanned ``messages``; the context lookup walked whole sessions.

What it adds, on PostgreSQL only:

* ``messages.search_vector``, a generated (stored) ``tsvector`` of exactly the text
  revision 0011 indexed, and its GIN index ``idx_messages_search_vector``, which replaces
  0011's expression index ``idx_messages_fts`` (ranking now reads the stored vector);
* ``hermes_cjk_grams(text)``, an immutable function returning every CJK character and
  every pair of adjacent CJK characters of a text, and the GIN index
  ``idx_messages_cjk_grams`` over it, so one- and two-character CJK terms (too short for
  ``pg_trgm``) are found through an index;
* ``idx_messages_session_id`` on ``(session_id, id)`` for the context lookup
  (the previous and next message of a hit).

On SQLite this revision changes nothing: the file keeps upstream's v11 schema and
``schema_version`` 11, so upstream Hermes still reads it. Only ``alembic_version`` moves
to 0012. See ``docs/postgresql.md`` ("Revisions one backend needs").
The generated column is rewritten for every existing row inside this revision's
transaction; rows are kept and the downgrade drops only what was added here.
"""

from __future__ import annotations

from hermes_store.schema.migration_ops import dialect_name, execute_all

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

TRGM_INDEX = (
    f"CREATE INDEX IF NOT EXISTS idx_messages_trgm ON messages USING gin ({INDEXED_TEXT} gin_trgm_ops)"
)

POSTGRES_UPGRADE = (
    # Adding a stored generated column rewrites the table and rebuilds every index on it.
    # 0011's word index is replaced here and its trigram index is rebuilt after the
    # rewrite, so neither GIN index is rebuilt by the rewrite for nothing.
    "DROP INDEX IF EXISTS idx_messages_fts",
    "DROP INDEX IF EXISTS idx_messages_trgm",
    f"ALTER TABLE messages ADD COLUMN IF NOT EXISTS search_vector tsvector "
    f"GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, {INDEXED_TEXT})) STORED",
    TRGM_INDEX,
    "CREATE INDEX IF NOT EXISTS idx_messages_search_vector ON messages USING gin (search_vector)",
    CREATE_GRAMS_FUNCTION,
    f"CREATE INDEX IF NOT EXISTS idx_messages_cjk_grams ON messages USING gin "
    f"(hermes_cjk_grams({INDEXED_TEXT}))",
    "CREATE INDEX IF NOT EXISTS idx_messages_session_id ON messages (session_id, id)",
    # Fresh statistics, so the planner uses the new indexes on the first search.
    "ANALYZE messages",
)

POSTGRES_DOWNGRADE = (
    "DROP INDEX IF EXISTS idx_messages_session_id",
    "DROP INDEX IF EXISTS idx_messages_cjk_grams",
    "DROP FUNCTION IF EXISTS hermes_cjk_grams(text)",
    # Revision 0011's expression index, exactly as 0011 created it.
    f"CREATE INDEX IF NOT EXISTS idx_messages_fts ON messages USING gin "
    f"(to_tsvector('simple'::regconfig, {INDEXED_TEXT}))",
    "DROP INDEX IF EXISTS idx_messages_search_vector",
    "ALTER TABLE messages DROP COLUMN IF EXISTS search_vector",
)


def upgrade() -> None:
    if dialect_name() == "postgresql":
        execute_all(POSTGRES_UPGRADE)


def downgrade() -> None:
    if dialect_name() == "postgresql":
        execute_all(POSTGRES_DOWNGRADE)
