"""Add billing and cost columns to sessions.

Revision ID: 0005
Revises: 0004
Create Date: 2026-03-12

Why: upstream v5 (d417ba2a) accounts cache and reasoning tokens and the estimated/actual
cost of each session, with where the price came from.
Only missing columns are added (legacy files can already have them), and the downgrade
drops them natively so the table — and its FTS triggers — are never rebuilt.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from hermes_store.schema.migration_ops import add_columns_if_missing, drop_columns_if_present, squawk_ignore

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# Costs need double precision on PostgreSQL (its REAL is 4 bytes).
MONEY = sa.REAL().with_variant(postgresql.DOUBLE_PRECISION(), "postgresql")


def _columns() -> list[sa.Column[object]]:
    return [
        sa.Column("cache_read_tokens", sa.Integer(), server_default=sa.text("0")),
        sa.Column("cache_write_tokens", sa.Integer(), server_default=sa.text("0")),
        sa.Column("reasoning_tokens", sa.Integer(), server_default=sa.text("0")),
        sa.Column("billing_provider", sa.Text()),
        sa.Column("billing_base_url", sa.Text()),
        sa.Column("billing_mode", sa.Text()),
        sa.Column("estimated_cost_usd", MONEY),
        sa.Column("actual_cost_usd", MONEY),
        sa.Column("cost_status", sa.Text()),
        sa.Column("cost_source", sa.Text()),
        sa.Column("pricing_version", sa.Text()),
    ]


def upgrade() -> None:
    # INTEGER as upstream declares it (the models and the previous release share the
    # type); a constant DEFAULT adds the column without a rewrite (PostgreSQL 11+).
    squawk_ignore("prefer-bigint-over-int", "upstream's v5 token counters, INTEGER as upstream declares them")
    add_columns_if_missing("sessions", _columns())


def downgrade() -> None:
    # Dropped in the reverse order of their creation.
    drop_columns_if_present(
        "sessions",
        [
            "pricing_version",
            "cost_source",
            "cost_status",
            "actual_cost_usd",
            "estimated_cost_usd",
            "billing_mode",
            "billing_base_url",
            "billing_provider",
            "reasoning_tokens",
            "cache_write_tokens",
            "cache_read_tokens",
        ],
    )
