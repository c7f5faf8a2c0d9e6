"""PostgreSQL only: an index of each message's adjacent word pairs, for phrase search.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04

Why: the word index (``idx_messages_search_vector``) keeps no positions. A quoted phrase
(``"any does"``) is looked up as its words, and every message holding all of them is read
to check that they stand side by side. For common words that rarely do, a search reads
tens of thousands of rows to find a handful (``"does does"``: 62,614 rows for 37 hits,
470 ms at a million messages), and the cost grows with the store (phrases took twice as
long at three million messages as at one; ``CHANGELOG.md``, 2026-12-04).

What it adds, on PostgreSQL only:

* ``hermes_word_pairs(tsvector)``: the hashes (``hashtext``) of ``a || ' ' || b`` for
  every two lexemes of a stored vector at adjacent positions — exactly the pairs the
  phrase operator ``<->`` can match, position limits included;
* ``idx_messages_word_pairs``, a GIN index over ``hermes_word_pairs(search_vector)``.
  A phrase's adjacent word pairs must all be in a message that holds the phrase, so a
  search finds its candidates there and checks only those (a hash that collides only
  adds a candidate the check drops).

Online: a function (no lock) and an index built ``CONCURRENTLY`` (a killed build leaves
an invalid index that the next run drops and builds again). No column, no backfill: the
index computes the pairs from the vector the trigger already stores, for every row and
for every row written after, the previous release's writes included. The previous
release never reads the index.

On SQLite this revision changes nothing; only ``alembic_version`` moves to 0017.
"""

from __future__ import annotations

from hermes_store.schema.migration_ops import (
    analyze,
    create_index_concurrently,
    dialect_name,
    drop_index_concurrently,
    execute_with_lock_retry,
    in_store_schema,
    outside_transaction,
)

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

CREATE_PAIRS_FUNCTION = """CREATE OR REPLACE FUNCTION hermes_word_pairs(vector tsvector) RETURNS int[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
WITH placed AS (
    SELECT u.lexeme, p
    FROM unnest(vector) AS u(lexeme, positions, weights), unnest(u.positions) AS p
)
SELECT COALESCE(array_agg(DISTINCT hashtext(a.lexeme || ' ' || b.lexeme)), '{}'::int[])
FROM placed a JOIN placed b ON b.p = a.p + 1
$$"""

INDEX_NAME = "idx_messages_word_pairs"
CREATE_INDEX = (
    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX_NAME} ON messages "
    "USING gin (hermes_word_pairs(search_vector))"
)


def upgrade() -> None:
    if dialect_name() != "postgresql":
        return
    with outside_transaction():
        execute_with_lock_retry(CREATE_PAIRS_FUNCTION)
        create_index_concurrently(INDEX_NAME, CREATE_INDEX)
        analyze("messages")


def downgrade() -> None:
    if dialect_name() != "postgresql":
        return
    with outside_transaction():
        drop_index_concurrently(INDEX_NAME)
        execute_with_lock_retry(f"DROP FUNCTION IF EXISTS {in_store_schema('hermes_word_pairs')}(tsvector)")
