"""The ``state_meta`` key/value table."""

from __future__ import annotations

from sqlalchemy import orm, select
from sqlalchemy.dialects import postgresql, sqlite

from hermes_store.models import StateMeta


def get(db: orm.Session, key: str) -> str | None:
    """The value stored under ``key``, or ``None``."""
    return db.execute(select(StateMeta.value).where(StateMeta.key == key)).scalar()


def put(db: orm.Session, key: str, value: str | None) -> None:
    """Store ``value`` under ``key`` (an upsert: fires UPDATE, never REPLACE)."""
    builder = postgresql.insert if db.get_bind().dialect.name == "postgresql" else sqlite.insert
    statement = builder(StateMeta).values(key=key, value=value)
    db.execute(
        statement.on_conflict_do_update(index_elements=["key"], set_={"value": statement.excluded.value})
    )
