"""Models of what newer upstream Hermes releases add to a ``state.db``, for analytics.

Upstream's releases after schema 17 add columns to ``sessions`` and ``messages`` and
tables of their own (a file of schema 26 or later has them; this store's own files do
not). They are mapped here, in a :class:`~sqlalchemy.MetaData` of their own, so that an
analytics script can query them on such a file, while the store's own models, migrations
and copies stay those of the schema it writes. On a file without them, a query naming
them fails with SQLite's "no such table" or "no such column".

Every column added after schema 17 is deferred: ``select(UpstreamSession)`` reads the id
only, and a script names the columns it wants. ``UpstreamSession`` maps the same table as
``Session``, so a query that takes columns of both joins an alias::

    from sqlalchemy import select
    from sqlalchemy.orm import aliased
    from hermes_store.models import Session, UpstreamSession

    select(UpstreamSession.id, UpstreamSession.prompt).where(UpstreamSession.hidden == 0)
    upstream = aliased(UpstreamSession)
    select(Session.model, upstream.prompt).join(Session.upstream.of_type(upstream))

(``some_session.upstream`` loads the same row's newer columns.)

:attr:`UpstreamSession.prompt` is the session's system prompt as upstream reads it: the
shared text of ``system_prompts`` its hash names, else the old ``system_prompt`` column.
Columns of later upstream versions than a file's are simply absent from it: name only
those the file has (``hermes-store info`` tells its schema version).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Float, Integer, LargeBinary, MetaData, Text, func, select, text
from sqlalchemy.orm import Mapped, column_property, deferred, foreign, mapped_column, relationship

from hermes_store.schema.models import NAMING_CONVENTION, Base, Message, Session


class UpstreamBase(Base):
    """Base of the upstream-only models: their own metadata, never migrated or copied."""

    __abstract__ = True
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _later(kind: Any = Text, **options: Any) -> Any:
    """A column a newer upstream added: mapped, deferred (loaded only when named)."""
    return mapped_column(kind, deferred=True, **options)


class SystemPrompt(UpstreamBase):
    """One distinct system prompt, shared by the sessions whose hash names it (schema 25)."""

    __tablename__ = "system_prompts"

    hash: Mapped[str] = mapped_column(Text, primary_key=True)
    """SHA-256 of the prompt's UTF-8 text, in hex."""
    prompt: Mapped[str] = mapped_column(Text, nullable=False)


class UpstreamSession(UpstreamBase):
    """The ``sessions`` columns upstream added after schema 17 (join on ``id``; see
    ``Session.upstream``)."""

    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    system_prompt: Mapped[str | None] = _later()
    system_prompt_hash: Mapped[str | None] = _later()
    display_name: Mapped[str | None] = _later()
    origin_json: Mapped[str | None] = _later()
    expiry_finalized: Mapped[int | None] = _later(Integer)
    git_metadata_generation: Mapped[int | None] = _later(Integer)
    title_source: Mapped[str | None] = _later()
    last_activity_at: Mapped[float | None] = _later(Float)
    last_activity_description: Mapped[str | None] = _later()
    last_activity_provenance: Mapped[str | None] = _later()
    compression_fallback_streak: Mapped[int | None] = _later(Integer)
    compression_ineffective_count: Mapped[int | None] = _later(Integer)
    profile_name: Mapped[str | None] = _later()
    pinned: Mapped[int | None] = _later(Integer)
    hidden: Mapped[int | None] = _later(Integer)
    last_read_at: Mapped[float | None] = _later(Float)
    # Schema 27-30.
    created_source: Mapped[str | None] = _later()
    compression_recovery_deadline: Mapped[float | None] = _later(Float)
    compression_overload_streak: Mapped[int | None] = _later(Integer)
    transport_profile: Mapped[str | None] = _later()
    tool_names: Mapped[str | None] = _later()


UpstreamSession.prompt = deferred(
    column_property(
        func.coalesce(
            select(SystemPrompt.prompt)
            .where(SystemPrompt.hash == UpstreamSession.system_prompt_hash)
            .correlate_except(SystemPrompt)
            .scalar_subquery(),
            UpstreamSession.system_prompt,
        )
    )
)


class UpstreamMessage(UpstreamBase):
    """The ``messages`` columns upstream added after schema 17 (join on ``id``)."""

    __tablename__ = "messages"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    effect_disposition: Mapped[str | None] = _later()
    api_content: Mapped[str | None] = _later()
    display_kind: Mapped[str | None] = _later()
    display_metadata: Mapped[str | None] = _later()
    # Schema 27-30.
    compressed_summary: Mapped[int | None] = _later(Integer, name="_compressed_summary")
    display_identity: Mapped[bytes | None] = _later(LargeBinary)
    display_order: Mapped[int | None] = _later(Integer)


class SessionModelUsage(UpstreamBase):
    """Tokens and cost per model, provider route and auxiliary task of a session (schema 20-22)."""

    __tablename__ = "session_model_usage"

    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    model: Mapped[str] = mapped_column(Text, primary_key=True)
    billing_provider: Mapped[str] = mapped_column(Text, primary_key=True, server_default=text("''"))
    billing_base_url: Mapped[str] = mapped_column(Text, primary_key=True, server_default=text("''"))
    billing_mode: Mapped[str] = mapped_column(Text, primary_key=True, server_default=text("''"))
    task: Mapped[str] = mapped_column(Text, primary_key=True, server_default=text("''"))
    api_call_count: Mapped[int] = mapped_column(Integer)
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    cache_read_tokens: Mapped[int] = mapped_column(Integer)
    cache_write_tokens: Mapped[int] = mapped_column(Integer)
    reasoning_tokens: Mapped[int] = mapped_column(Integer)
    estimated_cost_usd: Mapped[float] = mapped_column(Float)
    actual_cost_usd: Mapped[float] = mapped_column(Float)
    cost_status: Mapped[str | None] = mapped_column(Text)
    cost_source: Mapped[str | None] = mapped_column(Text)
    first_seen: Mapped[float | None] = mapped_column(Float)
    last_seen: Mapped[float | None] = mapped_column(Float)


class GatewayRouting(UpstreamBase):
    """The gateway's routing index: which session a chat key maps to (schema 19)."""

    __tablename__ = "gateway_routing"

    scope: Mapped[str] = mapped_column(Text, primary_key=True, server_default=text("''"))
    session_key: Mapped[str] = mapped_column(Text, primary_key=True)
    entry_json: Mapped[str] = mapped_column(Text, nullable=False)
    updated_at: Mapped[float] = mapped_column(Float, nullable=False)


class GatewayHygieneState(UpstreamBase):
    """Consecutive failures of the gateway's session hygiene, per chat key."""

    __tablename__ = "gateway_hygiene_state"

    session_key: Mapped[str] = mapped_column(Text, primary_key=True)
    failure_streak: Mapped[int] = mapped_column(Integer, nullable=False)


class SessionTurnLease(UpstreamBase):
    """Which process holds a conversation's turn (cross-process turn serialisation)."""

    __tablename__ = "session_turn_leases"

    conversation_id: Mapped[str] = mapped_column(Text, primary_key=True)
    holder: Mapped[str] = mapped_column(Text, nullable=False)
    acquired_at: Mapped[float] = mapped_column(Float, nullable=False)
    expires_at: Mapped[float] = mapped_column(Float, nullable=False)


class AsyncDelegation(UpstreamBase):
    """A background sub-agent task and the delivery of its result (schema 21)."""

    __tablename__ = "async_delegations"

    delegation_id: Mapped[str] = mapped_column(Text, primary_key=True)
    origin_session: Mapped[str] = mapped_column(Text, nullable=False)
    origin_ui_session_id: Mapped[str | None] = mapped_column(Text)
    parent_session_id: Mapped[str | None] = mapped_column(Text)
    state: Mapped[str] = mapped_column(Text, nullable=False)
    dispatched_at: Mapped[float] = mapped_column(Float, nullable=False)
    completed_at: Mapped[float | None] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float, nullable=False)
    event_json: Mapped[str | None] = mapped_column(Text)
    result_json: Mapped[str | None] = mapped_column(Text)
    delivery_state: Mapped[str] = mapped_column(Text, nullable=False)
    delivery_attempts: Mapped[int] = mapped_column(Integer, nullable=False)
    delivered_at: Mapped[float | None] = mapped_column(Float)
    owner_pid: Mapped[int | None] = mapped_column(Integer)
    owner_started_at: Mapped[int | None] = mapped_column(Integer)
    task_json: Mapped[str | None] = mapped_column(Text)
    delivery_claim: Mapped[str | None] = mapped_column(Text)
    delivery_claimed_at: Mapped[float | None] = mapped_column(Float)


class ConversationGeneration(UpstreamBase):
    """A per-peer counter bumped at each reset boundary (schema 27-30)."""

    __tablename__ = "conversation_generations"

    source: Mapped[str] = mapped_column(Text, primary_key=True)
    session_key: Mapped[str] = mapped_column(Text, primary_key=True)
    generation: Mapped[int] = mapped_column(Integer, nullable=False)


class GatewayHeartbeat(UpstreamBase):
    """A running gateway backend's last sign of life (schema 27-30)."""

    __tablename__ = "gateway_heartbeats"

    backend_id: Mapped[str] = mapped_column(Text, primary_key=True)
    pid: Mapped[int] = mapped_column(Integer, nullable=False)
    started_at: Mapped[float] = mapped_column(Float, nullable=False)
    last_heartbeat: Mapped[float] = mapped_column(Float, nullable=False)
    profile: Mapped[str] = mapped_column(Text, nullable=False)
    host: Mapped[str] = mapped_column(Text, nullable=False)


# The newer columns of a store's session and message rows, one join away.
Session.upstream = relationship(
    UpstreamSession,
    primaryjoin=Session.id == foreign(UpstreamSession.id),
    viewonly=True,
    uselist=False,
    lazy="select",
)
Message.upstream = relationship(
    UpstreamMessage,
    primaryjoin=Message.id == foreign(UpstreamMessage.id),
    viewonly=True,
    uselist=False,
    lazy="select",
)
