"""Add sessions.title.

Revision ID: 0003
Revises: 0002
Create Date: 2026-03-02

Why: upstream v3 (60b6abef) lets users name sessions and resume them by title.
Only missing columns are added (legacy files can already have them), and the downgrade
drops them natively so the table — and its FTS triggers — are never rebuilt.
"""

from __future__ import annotations

import sqlalchemy as sa

from hermes_store.schema.migration_ops import add_columns_if_missing, drop_columns_if_present

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _columns() -> list[sa.Column[object]]:
    return [
        sa.Column("title", sa.Text()),
    ]


def upgrade() -> None:
    add_columns_if_missing("sessions", _columns())


def downgrade() -> None:
    drop_columns_if_present("sessions", ["title"])
