"""Add sessions.api_call_count.

Revision ID: 0008
Revises: 0007
Create Date: 2026-04-08

Why: upstream v8 (5fb14316) counts provider API calls per session for cost analysis.
Only missing columns are added (legacy files can already have them), and the downgrade
drops them natively so the table — and its FTS triggers — are never rebuilt.
"""

from __future__ import annotations

import sqlalchemy as sa

from hermes_store.schema.migration_ops import add_columns_if_missing, drop_columns_if_present, squawk_ignore

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def _columns() -> list[sa.Column[object]]:
    return [
        sa.Column("api_call_count", sa.Integer(), server_default=sa.text("0")),
    ]


def upgrade() -> None:
    # INTEGER as upstream declares it (the models and the previous release share the
    # type); a constant DEFAULT adds the column without a rewrite (PostgreSQL 11+).
    squawk_ignore("prefer-bigint-over-int", "upstream's v8 counter, INTEGER as upstream declares them")
    add_columns_if_missing("sessions", _columns())


def downgrade() -> None:
    drop_columns_if_present("sessions", ["api_call_count"])
