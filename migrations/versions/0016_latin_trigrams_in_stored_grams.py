"""PostgreSQL only: a CJK message's stored grams also hold its ASCII trigrams.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04

Why: a search for a Latin word beside a short CJK term (``them 那个``) intersected the
gram index with ``pg_trgm``'s. ``pg_trgm`` indexes every message, so a common word's
trigrams hand over a posting list that grows with the whole store (170,385 candidates for
``them`` at a million messages, 51 ms), to keep the few that also hold the CJK pair. Only
messages holding CJK can match such a search, and their grams are already stored: with
the lower-cased ASCII trigrams of the same text beside the CJK grams, one containment
(``cjk_grams @> ARRAY['那个', 'the', 'hem']``) finds the candidates within the CJK
messages alone, and GIN intersects the keys itself, led by the rarest.

What it changes, on PostgreSQL only:

* ``hermes_search_grams(text)``: ``hermes_cjk_grams`` of the text and, when there is at
  least one, every three-character window of its runs of ASCII letters and digits, with
  ASCII letters lower-cased (so ``THEM`` gives ``the`` and ``hem``, as ``them`` does). A
  text without CJK still gets no grams at all;
* the trigger function (``hermes_messages_search_vector``) stores that in
  ``messages.cjk_grams`` — the running release's writes included, from the moment this
  step commits;
* the CJK messages already there are refilled in batches of ids.

The column and its index (``idx_messages_stored_cjk_grams``) stay: every array only
gains elements, so the previous release's gram conditions (CJK grams only) find exactly
what they found. Online, in 0015's pattern (``docs/postgresql.md``, "Online
migrations"): each batch is its own transaction, and a killed run resumes at the first
CJK message whose grams differ from the new function's. The downgrade restores 0015's
trigger function and grams.

On SQLite this revision changes nothing; only ``alembic_version`` moves to 0016.
"""

from __future__ import annotations

from alembic import context

from hermes_store.schema.migration_ops import (
    analyze,
    backfill,
    dialect_name,
    execute_with_lock_retry,
    outside_transaction,
)

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

INDEXED_TEXT = "COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, '')"
NEW_INDEXED_TEXT = (
    "COALESCE(NEW.content, '') || ' ' || COALESCE(NEW.tool_name, '') || ' ' || COALESCE(NEW.tool_calls, '')"
)

UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LOWER = UPPER.lower()

CREATE_GRAMS_FUNCTION = f"""CREATE OR REPLACE FUNCTION hermes_search_grams(doc text) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    grams text[] := hermes_cjk_grams(doc);
BEGIN
    IF cardinality(grams) = 0 THEN
        RETURN grams;
    END IF;
    RETURN grams || ARRAY(
        SELECT DISTINCT substr(run.parts[1], i, 3)
        FROM regexp_matches(translate(doc, '{UPPER}', '{LOWER}'), '[a-z0-9]{{3,}}', 'g') AS run(parts),
             generate_series(1, char_length(run.parts[1]) - 2) AS i
    );
END
$$"""
"""PL/pgSQL, not SQL: the grams are computed once into a variable. As one SQL statement
(a sub-select holding ``hermes_cjk_grams``) PostgreSQL would not inline the function and,
flattening the sub-select, compute the grams once per reference: 130 µs for a message
without CJK (against 10 µs) and 630 µs for a CJK one (against 270 µs), measured over
10,000 messages of each kind at a million messages. Every write pays it, through the
trigger."""

STORED_GRAMS = f"NULLIF(hermes_search_grams({INDEXED_TEXT}), '{{}}'::text[])"
"""A message's stored grams from this revision: NULL for a text without CJK characters."""

PREVIOUS_STORED_GRAMS = f"NULLIF(hermes_cjk_grams({INDEXED_TEXT}), '{{}}'::text[])"
"""Revision 0015's: the CJK grams alone."""

CREATE_TRIGGER_FUNCTION = f"""CREATE OR REPLACE FUNCTION hermes_messages_search_vector() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.search_vector := hermes_search_vector(NEW.content, NEW.tool_name, NEW.tool_calls);
    NEW.cjk_grams := NULLIF(hermes_search_grams({NEW_INDEXED_TEXT}), '{{}}'::text[]);
    RETURN NEW;
END
$$"""


def _previous_trigger_function() -> str:
    """Revision 0015's trigger function, as 0015 creates it (restored on downgrade)."""
    script = context.script.get_revision("0015")
    assert script is not None
    return str(script.module.CREATE_TRIGGER_FUNCTION)


def upgrade() -> None:
    if dialect_name() != "postgresql":
        return
    with outside_transaction():
        execute_with_lock_retry(CREATE_GRAMS_FUNCTION)
        # The trigger first: every row written from now on has the new grams, so the
        # refill only has to reach the rows that were there before.
        execute_with_lock_retry(CREATE_TRIGGER_FUNCTION)
        backfill(
            "ASCII trigrams in stored grams",
            "messages",
            f"cjk_grams = {STORED_GRAMS}",
            f"cjk_grams IS NOT NULL AND cjk_grams IS DISTINCT FROM {STORED_GRAMS}",
        )
        analyze("messages")


def downgrade() -> None:
    if dialect_name() != "postgresql":
        return
    with outside_transaction():
        execute_with_lock_retry(_previous_trigger_function())
        backfill(
            "CJK grams alone",
            "messages",
            f"cjk_grams = {PREVIOUS_STORED_GRAMS}",
            f"cjk_grams IS NOT NULL AND cjk_grams IS DISTINCT FROM {PREVIOUS_STORED_GRAMS}",
        )
        execute_with_lock_retry("DROP FUNCTION IF EXISTS hermes_search_grams(text)")
        analyze("messages")
