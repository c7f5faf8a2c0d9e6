"""Add messages.reasoning_content.

Revision ID: 0007
Revises: 0006
Create Date: 2026-04-02

Why: upstream v7 (a7d78d3b) stores reasoning_content separately from reasoning; it was
inserted by renumbering the old v7, which is why legacy "v7" files may lack it.
Only missing columns are added (legacy files can already have them), and the downgrade
drops them natively so the table — and its FTS triggers — are never rebuilt.
"""

from __future__ import annotations

import sqlalchemy as sa

from hermes_store.schema.migration_ops import add_columns_if_missing, drop_columns_if_present

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def _columns() -> list[sa.Column[object]]:
    return [
        sa.Column("reasoning_content", sa.Text()),
    ]


def upgrade() -> None:
    add_columns_if_missing("messages", _columns())


def downgrade() -> None:
    drop_columns_if_present("messages", ["reasoning_content"])
