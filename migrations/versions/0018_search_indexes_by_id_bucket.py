"""PostgreSQL only: the three search GIN indexes also keyed by each message's id bucket.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05

Why: a search ranks or lists the newest matching messages window by window, each window a
range of ids. GIN cannot bound a lookup by a range: it hands back every candidate in the
store, and a window then reads each candidate's row to drop those outside its ids. When
the planner underestimates a containment of several keys (``cjk_grams @> '{那个,chu,hun,
ung}'``: 11 rows estimated, 2,191 at ten million messages) it never intersects the
candidates with the window's ids, so the cost of a window grows with the store: ``chung
那个`` took 4.7 ms at a million messages and 18.6 ms at ten million (CHANGELOG.md, 2026-12-05).

What it changes, on PostgreSQL only: the word index, the stored-grams index and the
word-pair index gain a second column, ``id >> 18`` — the message's bucket of 262,144 ids
(``btree_gin`` gives GIN the integer's equality). A window's statement names its bucket
(``(m.id >> 18) = 37``) beside its words or grams; GIN then walks the bucket key's and the
words' posting lists in step, skipping to the bucket's first entry in each, so a window
reads the candidates of its own bucket only, however many buckets the store holds.

* ``CREATE EXTENSION IF NOT EXISTS btree_gin`` (a trusted extension shipped with
  PostgreSQL, like ``pg_trgm`` which revision 0011 requires);
* ``idx_messages_search_vector_bucket`` over ``(search_vector, (id >> 18))``,
  ``idx_messages_cjk_grams_bucket`` over ``(cjk_grams, (id >> 18)) WHERE cjk_grams IS NOT
  NULL`` and ``idx_messages_word_pairs_bucket`` over ``(hermes_word_pairs(search_vector),
  (id >> 18))``, each built ``CONCURRENTLY``;
* then the three indexes they replace (``idx_messages_search_vector``,
  ``idx_messages_stored_cjk_grams``, ``idx_messages_word_pairs``) dropped ``CONCURRENTLY``.
  A multicolumn GIN index serves a condition on its first column alone as the one-column
  index did (the same keys, each in its own column's part of the index), so the previous
  release's searches, which name no bucket, use the new indexes unchanged.

Online: no column, no backfill, no table lock beyond the builds' and drops' ``SHARE
UPDATE EXCLUSIVE``. A killed run resumes: an INVALID leftover build is dropped and built
again, an index already built or dropped is skipped. The old indexes go only once all
three new ones are valid, so a search never lacks an index.

On SQLite this revision changes nothing; only ``alembic_version`` moves to 0018.
"""

from __future__ import annotations

from hermes_store.schema.migration_ops import (
    analyze,
    create_index_concurrently,
    dialect_name,
    drop_index_concurrently,
    execute_with_lock_retry,
    outside_transaction,
)

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

BUCKET = "(id >> 18)"
"""A message's id bucket; ``hermes_store.search.id_buckets.ID_BUCKET_BITS`` must match."""

BUCKETED = {
    "idx_messages_search_vector_bucket": f"(search_vector, {BUCKET})",
    "idx_messages_cjk_grams_bucket": f"(cjk_grams, {BUCKET}) WHERE cjk_grams IS NOT NULL",
    "idx_messages_word_pairs_bucket": f"(hermes_word_pairs(search_vector), {BUCKET})",
}
"""The new indexes: name → columns (and predicate)."""

REPLACED = {
    "idx_messages_search_vector": "(search_vector)",
    "idx_messages_stored_cjk_grams": "(cjk_grams) WHERE cjk_grams IS NOT NULL",
    "idx_messages_word_pairs": "(hermes_word_pairs(search_vector))",
}
"""The indexes of revisions 0012, 0015 and 0017 the new ones replace (rebuilt on downgrade)."""


def _create(name: str, columns: str) -> None:
    create_index_concurrently(
        name, f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON messages USING gin {columns}"
    )


def upgrade() -> None:
    if dialect_name() != "postgresql":
        return
    with outside_transaction():
        execute_with_lock_retry("CREATE EXTENSION IF NOT EXISTS btree_gin")
        for name, columns in BUCKETED.items():
            _create(name, columns)
        for name in REPLACED:
            drop_index_concurrently(name)
        analyze("messages")


def downgrade() -> None:
    if dialect_name() != "postgresql":
        return
    with outside_transaction():
        for name, columns in REPLACED.items():
            _create(name, columns)
        for name in BUCKETED:
            drop_index_concurrently(name)
        # btree_gin stays: other objects of the database may have come to use it.
        analyze("messages")
