"""The ORM models, at their public import path (``from hermes_store.models import Session``).

They are defined in :mod:`hermes_store.schema.models`; this module names the same objects.
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

__all__ = ["NAMING_CONVENTION", "SCHEMA_VERSION", "Base", "Message", "SchemaVersion", "Session", "StateMeta"]
