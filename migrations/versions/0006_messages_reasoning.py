"""Add reasoning columns to messages.

Revision ID: 0006
Revises: 0005
Create Date: 2026-03-20

Why: upstream v6 (42fec191) keeps the provider's reasoning text and structured reasoning
items so that reasoning models can be replayed faithfully.
Only missing columns are added (legacy files can already have them), and the downgrade
drops them natively so the table — and its FTS triggers — are never rebuilt.
"""

from __future__ import annotations

import sqlalchemy as sa

from hermes_store.schema.migration_ops import add_columns_if_missing, drop_columns_if_present

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _columns() -> list[sa.Column[object]]:
    return [
        sa.Column("reasoning", sa.Text()),
        sa.Column("reasoning_details", sa.Text()),
        sa.Column("codex_reasoning_items", sa.Text()),
    ]


def upgrade() -> None:
    add_columns_if_missing("messages", _columns())


def downgrade() -> None:
    # Dropped in the reverse order of their creation.
    drop_columns_if_present("messages", ["codex_reasoning_items", "reasoning_details", "reasoning"])
