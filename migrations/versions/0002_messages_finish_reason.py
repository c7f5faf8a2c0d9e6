"""Add messages.finish_reason.

Revision ID: 0002
Revises: 0001
Create Date: 2026-02-24

Why: upstream v2 (b33ed917) records why the model stopped, so an assistant turn can be replayed
with its finish reason.
Only missing columns are added (legacy files can already have them), and the downgrade
drops them natively so the table — and its FTS triggers — are never rebuilt.
"""

from __future__ import annotations

import sqlalchemy as sa

from hermes_store.schema.migration_ops import add_columns_if_missing, drop_columns_if_present

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _columns() -> list[sa.Column[object]]:
    return [
        sa.Column("finish_reason", sa.Text()),
    ]


def upgrade() -> None:
    add_columns_if_missing("messages", _columns())


def downgrade() -> None:
    drop_columns_if_present("messages", ["finish_reason"])
