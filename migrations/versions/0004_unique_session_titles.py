"""Unique index on non-NULL session titles.

Revision ID: 0004
Revises: 0003
Create Date: 2026-03-02

Why: upstream v4 (60b6abef) makes titles unique among non-NULL values so that a title
names one session (NULL titles stay unlimited). Upstream created the index without
looking at existing rows, so a legacy file holding duplicate titles failed on every
open. Here the earliest-started session keeps the title and later ones are renamed
"<title> #2", "<title> #3", … (skipping names already taken), with a warning.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

from hermes_store.schema.migration_ops import (
    create_index_concurrently,
    dialect_name,
    drop_index_concurrently,
    is_offline,
    outside_transaction,
)

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

log = logging.getLogger("hermes_store.migrations")


def _rename_duplicate_titles() -> None:
    bind = op.get_bind()
    duplicated = (
        bind.execute(
            sa.text("SELECT title FROM sessions WHERE title IS NOT NULL GROUP BY title HAVING COUNT(*) > 1")
        )
        .scalars()
        .all()
    )
    if not duplicated:
        return
    taken = set(bind.execute(sa.text("SELECT title FROM sessions WHERE title IS NOT NULL")).scalars())
    for title in duplicated:
        ids = (
            bind.execute(
                sa.text("SELECT id FROM sessions WHERE title = :t ORDER BY started_at, id"),
                {"t": title},
            )
            .scalars()
            .all()
        )
        number = 1
        for session_id in ids[1:]:
            number += 1
            while f"{title} #{number}" in taken:
                number += 1
            renamed = f"{title} #{number}"
            taken.add(renamed)
            bind.execute(
                sa.text("UPDATE sessions SET title = :new WHERE id = :id"),
                {"new": renamed, "id": session_id},
            )
            log.warning("duplicate session title %r: session %s renamed to %r", title, session_id, renamed)


def upgrade() -> None:
    if not is_offline():
        _rename_duplicate_titles()
    if dialect_name() == "sqlite":
        op.execute(
            sa.text(
                "CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_title_unique "
                "ON sessions(title) WHERE title IS NOT NULL"
            )
        )
    else:
        # Built CONCURRENTLY: the running release keeps creating sessions meanwhile. A
        # duplicate title written during the build fails it (the index is left INVALID);
        # the next run renames the duplicate and rebuilds the index.
        with outside_transaction():
            create_index_concurrently("idx_sessions_title_unique", POSTGRES_INDEX)


POSTGRES_INDEX = (
    "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS idx_sessions_title_unique "
    "ON sessions (title) WHERE title IS NOT NULL"
)


def downgrade() -> None:
    if dialect_name() == "postgresql":
        with outside_transaction():
            drop_index_concurrently("idx_sessions_title_unique")
        return
    op.execute(sa.text("DROP INDEX IF EXISTS idx_sessions_title_unique"))
