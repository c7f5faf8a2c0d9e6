"""The ORM models, at their public import path (``from hermes_store.models import Session``).

They are defined in :mod:`hermes_store.schema.models` (the tables this store writes) and
:mod:`hermes_store.schema.upstream_models` (what newer upstream Hermes releases add to a
file, for analytics on such files); this module names the same objects.
"""

from hermes_store.schema.models import (
    NAMING_CONVENTION,
    SCHEMA_VERSION,
    Base,
    Message,
    SchemaVersion,
    Session,
    StateMeta,
)
from hermes_store.schema.upstream_models import (
    AsyncDelegation,
    ConversationGeneration,
    GatewayHeartbeat,
    GatewayHygieneState,
    GatewayRouting,
    SessionModelUsage,
    SessionTurnLease,
    SystemPrompt,
    UpstreamMessage,
    UpstreamSession,
)

__all__ = [
    "NAMING_CONVENTION",
    "SCHEMA_VERSION",
    "AsyncDelegation",
    "Base",
    "ConversationGeneration",
    "GatewayHeartbeat",
    "GatewayHygieneState",
    "GatewayRouting",
    "Message",
    "SchemaVersion",
    "Session",
    "SessionModelUsage",
    "SessionTurnLease",
    "StateMeta",
    "SystemPrompt",
    "UpstreamMessage",
    "UpstreamSession",
]
