"""The ``state_meta`` key/value table."""

from __future__ import annotations

from sqlalchemy import orm, select

from hermes_store.models import StateMeta
from hermes_store.repository.dialect_insert import insert_for


def get(db: orm.Session, key: str) -> str | None:
    """The value stored under ``key``, or ``None``."""
    return db.execute(select(StateMeta.value).where(StateMeta.key == key)).scalar()


def put(db: orm.Session, key: str, value: str | None) -> None:
    """Store ``value`` under ``key`` (an upsert: fires UPDATE, never REPLACE)."""
    statement = insert_for(db, StateMeta).values(key=key, value=value)
    db.execute(
        statement.on_conflict_do_update(index_elements=["key"], set_={"value": statement.excluded.value})
    )
