"""Add messages.codex_message_items.

Revision ID: 0009
Revises: 0008
Create Date: 2026-04-20

Why: upstream v9 (81e01f6e) keeps Codex Responses message ids/phases for replay.
Only missing columns are added (legacy files can already have them), and the downgrade
drops them natively so the table — and its FTS triggers — are never rebuilt.
"""

from __future__ import annotations

import sqlalchemy as sa

from hermes_store.schema.migration_ops import add_columns_if_missing, drop_columns_if_present

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def _columns() -> list[sa.Column[object]]:
    return [
        sa.Column("codex_message_items", sa.Text()),
    ]


def upgrade() -> None:
    add_columns_if_missing("messages", _columns())


def downgrade() -> None:
    drop_columns_if_present("messages", ["codex_message_items"])
