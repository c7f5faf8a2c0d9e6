"""Upstream Hermes' schema 17: routing, workspace, handoff, compaction and undo columns.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06

Why: upstream Hermes moved from schema 11 to 17 (and added several columns without a
version bump). Its current code reads and writes every one of them, so a file it shares
with this store must carry them, with upstream's names, types and defaults:

* ``sessions``: gateway routing (``session_key``, ``chat_id``, ``chat_type``,
  ``thread_id``), the working directory and git metadata (``cwd``, ``git_branch``,
  ``git_repo_root``), the cross-platform handoff state machine (``handoff_state``,
  ``handoff_platform``, ``handoff_error``), a compression failure's back-off
  (``compression_failure_cooldown_until``, ``compression_failure_error``), and the
  ``rewind_count``/``archived`` flags (NOT NULL, default 0);
* ``messages``: ``platform_message_id``, ``observed`` (default 0), and the ``active``
  (default 1) / ``compacted`` (default 0) pair that in-place compaction and undo flip;
* the ``compression_locks`` table and the two opt-in Telegram topic tables;
* upstream's indexes on them.

Every step only adds what is missing, because files upstream opened already hold some or
all of these (and may hold columns upstream later dropped, which are left untouched).
Existing rows take the defaults: every message stays live. On PostgreSQL the columns are
added under the short retried lock timeout (a constant default is a catalog change, never
a rewrite) and the indexes are built concurrently.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from hermes_store.schema.migration_ops import (
    add_columns_if_missing,
    create_index_concurrently,
    dialect_name,
    drop_columns_if_present,
    drop_index_concurrently,
    execute_all,
    outside_transaction,
    table_names,
    with_lock_retry,
)

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None
schema_version = 17


def _session_columns() -> list[sa.Column[object]]:
    text = ("session_key", "chat_id", "chat_type", "thread_id", "cwd", "git_branch", "git_repo_root")
    handoff = ("handoff_state", "handoff_platform", "handoff_error")
    return [
        *(sa.Column(name, sa.Text()) for name in text + handoff),
        sa.Column("compression_failure_cooldown_until", sa.Float(precision=53)),
        sa.Column("compression_failure_error", sa.Text()),
        sa.Column("rewind_count", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("archived", sa.Integer(), nullable=False, server_default=sa.text("0")),
    ]


def _message_columns() -> list[sa.Column[object]]:
    return [
        sa.Column("platform_message_id", sa.Text()),
        sa.Column("observed", sa.Integer(), server_default=sa.text("0")),
        sa.Column("active", sa.Integer(), nullable=False, server_default=sa.text("1")),
        sa.Column("compacted", sa.Integer(), nullable=False, server_default=sa.text("0")),
    ]


INDEXES: dict[str, str] = {
    "idx_sessions_source_id": "sessions (source, id)",
    "idx_sessions_session_key": "sessions (session_key, started_at DESC)",
    "idx_sessions_gateway_peer": "sessions (source, user_id, chat_id, chat_type, thread_id, started_at DESC)",
    "idx_sessions_handoff_state": "sessions (handoff_state, started_at)",
    "idx_messages_session_active": "messages (session_id, active, timestamp)",
    "idx_messages_platform_msg_id": (
        "messages (session_id, platform_message_id) WHERE platform_message_id IS NOT NULL"
    ),
}
"""Upstream's indexes on the new columns, by name (the same names, so a file upstream
already indexed is not indexed twice)."""


def _create_tables() -> None:
    present = table_names()
    epoch = sa.Float(precision=53)
    if "compression_locks" not in present:
        op.create_table(
            "compression_locks",
            sa.Column("session_id", sa.Text(), primary_key=True),
            sa.Column("holder", sa.Text(), nullable=False),
            sa.Column("acquired_at", epoch, nullable=False),
            sa.Column("expires_at", epoch, nullable=False),
            sa.PrimaryKeyConstraint("session_id", name="pk_compression_locks"),
        )
    if "telegram_dm_topic_mode" not in present:
        op.create_table(
            "telegram_dm_topic_mode",
            sa.Column("chat_id", sa.Text()),
            sa.Column("user_id", sa.Text(), nullable=False),
            sa.Column("enabled", sa.Integer(), nullable=False, server_default=sa.text("1")),
            sa.Column("activated_at", epoch, nullable=False),
            sa.Column("updated_at", epoch, nullable=False),
            sa.Column("has_topics_enabled", sa.Integer()),
            sa.Column("allows_users_to_create_topics", sa.Integer()),
            sa.Column("capability_checked_at", epoch),
            sa.Column("intro_message_id", sa.Text()),
            sa.Column("pinned_message_id", sa.Text()),
            sa.PrimaryKeyConstraint("chat_id", name="pk_telegram_dm_topic_mode"),
        )
    if "telegram_dm_topic_bindings" not in present:
        op.create_table(
            "telegram_dm_topic_bindings",
            sa.Column("chat_id", sa.Text(), nullable=False),
            sa.Column("thread_id", sa.Text(), nullable=False),
            sa.Column("user_id", sa.Text(), nullable=False),
            sa.Column("session_key", sa.Text(), nullable=False),
            sa.Column("session_id", sa.Text(), nullable=False),
            sa.Column("managed_mode", sa.Text(), nullable=False, server_default=sa.text("'auto'")),
            sa.Column("linked_at", epoch, nullable=False),
            sa.Column("updated_at", epoch, nullable=False),
            sa.PrimaryKeyConstraint("chat_id", "thread_id", name="pk_telegram_dm_topic_bindings"),
            sa.ForeignKeyConstraint(
                ["session_id"],
                ["sessions.id"],
                name="fk_telegram_dm_topic_bindings_session_id_sessions",
                ondelete="CASCADE",
            ),
        )
    execute_all(
        [
            "CREATE INDEX IF NOT EXISTS idx_compression_locks_expires ON compression_locks (expires_at)",
            "CREATE UNIQUE INDEX IF NOT EXISTS idx_telegram_dm_topic_bindings_session "
            "ON telegram_dm_topic_bindings (session_id)",
            "CREATE INDEX IF NOT EXISTS idx_telegram_dm_topic_bindings_user "
            "ON telegram_dm_topic_bindings (user_id, chat_id)",
        ]
    )


def upgrade() -> None:
    add_columns_if_missing("sessions", _session_columns())
    add_columns_if_missing("messages", _message_columns())
    with_lock_retry(_create_tables, "creating the compression-lock and Telegram topic tables")
    if dialect_name() == "postgresql":
        with outside_transaction():
            for name, target in INDEXES.items():
                create_index_concurrently(name, f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {target}")
        return
    execute_all(f"CREATE INDEX IF NOT EXISTS {name} ON {target}" for name, target in INDEXES.items())


def downgrade() -> None:
    if dialect_name() == "postgresql":
        with outside_transaction():
            for name in INDEXES:
                drop_index_concurrently(name)
    else:
        execute_all(f"DROP INDEX IF EXISTS {name}" for name in INDEXES)
    for table in ("telegram_dm_topic_bindings", "telegram_dm_topic_mode", "compression_locks"):
        op.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
    drop_columns_if_present("messages", [column.name for column in _message_columns()])
    drop_columns_if_present("sessions", [column.name for column in _session_columns()])
