"""Typed declarative models of Hermes' ``state.db`` at upstream schema version 17.

The tables, columns, types, defaults and indexes are those upstream Hermes creates, so
that one database file can be shared by upstream Hermes and hermes_store. Analytics
scripts can query them directly::

    from sqlalchemy import func, select
    from hermes_store.schema.models import Session

    select(Session.model, func.sum(Session.input_tokens)).group_by(Session.model)

The model ``Session`` shadows :class:`sqlalchemy.orm.Session`; import the ORM one as
``from sqlalchemy import orm`` and write ``orm.Session``.

The FTS5 tables (``messages_fts``, ``messages_fts_trigram``) and their triggers are not
models: they are raw DDL owned by the migrations and maintained by SQLite itself.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import ForeignKey, Index, Integer, MetaData, Text, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from hermes_store.db.column_types import EpochSeconds, Float8, MessageContent, Money
from hermes_store.schema.legacy import HEAD_VERSION

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """Declarative base owning the naming convention and the Python→SQL type map."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {str: Text(), int: Integer(), float: Float8}


def _zero() -> Any:
    return text("0")


def _one() -> Any:
    return text("1")


TITLE_INDEX = "idx_sessions_title_unique"
"""The unique index on ``sessions.title`` (partial: NULL titles are not compared)."""


class Session(Base):
    """One conversation (``sessions``): metadata, lineage, title, token and cost counters."""

    __tablename__ = "sessions"
    __table_args__ = (
        Index("idx_sessions_source", "source"),
        Index("idx_sessions_parent", "parent_session_id"),
        Index("idx_sessions_started", text("started_at DESC")),
        # Partial on every backend (revision 0004 creates it so on PostgreSQL too). Only
        # SQLite's keyword is spelled here: a postgresql_* keyword would import the
        # PostgreSQL dialect on every start-up of a SQLite store.
        Index(
            TITLE_INDEX,
            "title",
            unique=True,
            sqlite_where=text("title IS NOT NULL"),
        ),
        Index("idx_sessions_source_id", "source", "id"),
        Index("idx_sessions_session_key", "session_key", text("started_at DESC")),
        Index(
            "idx_sessions_gateway_peer",
            "source",
            "user_id",
            "chat_id",
            "chat_type",
            "thread_id",
            text("started_at DESC"),
        ),
        Index("idx_sessions_handoff_state", "handoff_state", "started_at"),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    source: Mapped[str] = mapped_column(Text, nullable=False)
    user_id: Mapped[str | None]
    model: Mapped[str | None]
    model_config: Mapped[str | None]
    system_prompt: Mapped[str | None]
    parent_session_id: Mapped[str | None] = mapped_column(ForeignKey("sessions.id"))
    started_at: Mapped[float] = mapped_column(EpochSeconds, nullable=False)
    ended_at: Mapped[float | None] = mapped_column(EpochSeconds)
    end_reason: Mapped[str | None]
    message_count: Mapped[int | None] = mapped_column(server_default=_zero())
    tool_call_count: Mapped[int | None] = mapped_column(server_default=_zero())
    input_tokens: Mapped[int | None] = mapped_column(server_default=_zero())
    output_tokens: Mapped[int | None] = mapped_column(server_default=_zero())
    cache_read_tokens: Mapped[int | None] = mapped_column(server_default=_zero())
    cache_write_tokens: Mapped[int | None] = mapped_column(server_default=_zero())
    reasoning_tokens: Mapped[int | None] = mapped_column(server_default=_zero())
    billing_provider: Mapped[str | None]
    billing_base_url: Mapped[str | None]
    billing_mode: Mapped[str | None]
    estimated_cost_usd: Mapped[float | None] = mapped_column(Money)
    actual_cost_usd: Mapped[float | None] = mapped_column(Money)
    cost_status: Mapped[str | None]
    cost_source: Mapped[str | None]
    pricing_version: Mapped[str | None]
    title: Mapped[str | None]
    api_call_count: Mapped[int | None] = mapped_column(server_default=_zero())
    # Gateway routing: which chat/thread a session belongs to, so it can be found again
    # after a restart.
    session_key: Mapped[str | None]
    chat_id: Mapped[str | None]
    chat_type: Mapped[str | None]
    thread_id: Mapped[str | None]
    # Where the session ran (desktop project grouping).
    cwd: Mapped[str | None]
    git_branch: Mapped[str | None]
    git_repo_root: Mapped[str | None]
    # Cross-platform handoff state machine: NULL -> pending -> running -> completed | failed.
    handoff_state: Mapped[str | None]
    handoff_platform: Mapped[str | None]
    handoff_error: Mapped[str | None]
    # A failed compression's back-off, kept across resumes.
    compression_failure_cooldown_until: Mapped[float | None] = mapped_column(Float8)
    compression_failure_error: Mapped[str | None]
    rewind_count: Mapped[int] = mapped_column(nullable=False, server_default=_zero())
    archived: Mapped[int] = mapped_column(nullable=False, server_default=_zero())

    messages: Mapped[list[Message]] = relationship(
        back_populates="session", order_by="Message.id", passive_deletes="all"
    )
    parent: Mapped[Session | None] = relationship(back_populates="children", remote_side="Session.id")
    children: Mapped[list[Session]] = relationship(
        back_populates="parent", order_by="Session.started_at", passive_deletes="all"
    )

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, source={self.source!r}, title={self.title!r})"


class Message(Base):
    """One message of a session (``messages``), in insertion order by ``id``."""

    __tablename__ = "messages"
    __table_args__ = (
        Index("idx_messages_session", "session_id", "timestamp"),
        Index("idx_messages_session_active", "session_id", "active", "timestamp"),
        Index(
            "idx_messages_platform_msg_id",
            "session_id",
            "platform_message_id",
            sqlite_where=text("platform_message_id IS NOT NULL"),
        ),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id"), nullable=False)
    role: Mapped[str] = mapped_column(Text, nullable=False)
    content: Mapped[Any] = mapped_column(MessageContent(), nullable=True)
    tool_call_id: Mapped[str | None]
    tool_calls: Mapped[str | None]
    tool_name: Mapped[str | None]
    timestamp: Mapped[float] = mapped_column(EpochSeconds, nullable=False)
    token_count: Mapped[int | None]
    finish_reason: Mapped[str | None]
    reasoning: Mapped[str | None]
    reasoning_content: Mapped[str | None]
    reasoning_details: Mapped[str | None]
    codex_reasoning_items: Mapped[str | None]
    codex_message_items: Mapped[str | None]
    platform_message_id: Mapped[str | None]
    """The chat platform's own id for the message (e.g. a Telegram update id)."""
    observed: Mapped[int | None] = mapped_column(server_default=_zero())
    """1: a group message the agent saw but was not addressed by."""
    active: Mapped[int] = mapped_column(nullable=False, server_default=_one())
    """0: out of the live context (rewound, or archived by in-place compaction)."""
    compacted: Mapped[int] = mapped_column(nullable=False, server_default=_zero())
    """1: archived by in-place compaction (still searchable); with ``active = 0`` and
    ``compacted = 0`` the message was rewound (undone) and is hidden from search."""

    session: Mapped[Session] = relationship(back_populates="messages")

    def __repr__(self) -> str:
        return f"Message(id={self.id!r}, session_id={self.session_id!r}, role={self.role!r})"


class StateMeta(Base):
    """Key/value metadata (``state_meta``), e.g. when auto-prune last ran."""

    __tablename__ = "state_meta"

    key: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[str | None]


class CompressionLock(Base):
    """A lease that keeps two processes from compressing one session at once
    (``compression_locks``; no foreign key, as upstream)."""

    __tablename__ = "compression_locks"
    __table_args__ = (Index("idx_compression_locks_expires", "expires_at"),)

    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    holder: Mapped[str] = mapped_column(Text, nullable=False)
    acquired_at: Mapped[float] = mapped_column(EpochSeconds, nullable=False)
    expires_at: Mapped[float] = mapped_column(EpochSeconds, nullable=False)


class TelegramTopicMode(Base):
    """Per Telegram DM chat: whether topic mode is on and what the chat can do."""

    __tablename__ = "telegram_dm_topic_mode"

    chat_id: Mapped[str] = mapped_column(Text, primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    enabled: Mapped[int] = mapped_column(nullable=False, server_default=_one())
    activated_at: Mapped[float] = mapped_column(EpochSeconds, nullable=False)
    updated_at: Mapped[float] = mapped_column(EpochSeconds, nullable=False)
    has_topics_enabled: Mapped[int | None]
    allows_users_to_create_topics: Mapped[int | None]
    capability_checked_at: Mapped[float | None] = mapped_column(EpochSeconds)
    intro_message_id: Mapped[str | None]
    pinned_message_id: Mapped[str | None]


class TelegramTopicBinding(Base):
    """One Telegram DM topic bound to one session (a session binds to at most one topic)."""

    __tablename__ = "telegram_dm_topic_bindings"
    __table_args__ = (
        Index("idx_telegram_dm_topic_bindings_session", "session_id", unique=True),
        Index("idx_telegram_dm_topic_bindings_user", "user_id", "chat_id"),
    )

    chat_id: Mapped[str] = mapped_column(Text, primary_key=True)
    thread_id: Mapped[str] = mapped_column(Text, primary_key=True)
    user_id: Mapped[str] = mapped_column(Text, nullable=False)
    session_key: Mapped[str] = mapped_column(Text, nullable=False)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False)
    managed_mode: Mapped[str] = mapped_column(Text, nullable=False, server_default=text("'auto'"))
    linked_at: Mapped[float] = mapped_column(EpochSeconds, nullable=False)
    updated_at: Mapped[float] = mapped_column(EpochSeconds, nullable=False)


class SchemaVersion(Base):
    """Upstream's one-row legacy version table (``schema_version``), kept equal to the revision.

    The table has no primary key in upstream's DDL; the mapper treats ``version`` as the
    identity so the row can still be read through the ORM.
    """

    __tablename__ = "schema_version"
    __mapper_args__ = {"primary_key": ["version"]}  # noqa: RUF012

    version: Mapped[int] = mapped_column(Integer, nullable=False)


SCHEMA_VERSION = HEAD_VERSION
"""The upstream schema version these models describe (defined once, in :mod:`hermes_store.schema.legacy`)."""
