"""The ``state_meta`` key/value table."""

from __future__ import annotations

from sqlalchemy import select

from hermes_store.db.backends import backend_for
from hermes_store.db.execution import Bind, run, scalar_text
from hermes_store.schema.models import StateMeta


def get(db: Bind, key: str) -> str | None:
    """The value stored under ``key``, or ``None``."""
    return scalar_text(db, select(StateMeta.value).where(StateMeta.key == key))


def put(db: Bind, key: str, value: str | None) -> None:
    """Store ``value`` under ``key`` (an upsert: fires UPDATE, never REPLACE)."""
    statement = backend_for(db).insert(StateMeta).values(key=key, value=value)
    run(db, statement.on_conflict_do_update(index_elements=["key"], set_={"value": statement.excluded.value}))
