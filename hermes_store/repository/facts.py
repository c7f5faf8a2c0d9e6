"""What a store holds, for reports (``hermes-store info``): counts, sources, storage.

Each figure is read on its own and is ``None`` when the database cannot give it (a
legacy or half-created file may lack a table), so a report always comes back. Works on
a plain ORM session over an engine, without opening a ``SessionDB`` (which would
migrate the file).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy import func, orm, select

from hermes_store.db.backends import backend_for
from hermes_store.db.profiles import store_schema
from hermes_store.schema.models import Message, Session


def _scalar(db: orm.Session, query: sa.Executable) -> Any:
    try:
        return db.execute(query).scalar()
    except sa.exc.DBAPIError:
        db.rollback()
        return None


def message_total(db: orm.Session) -> int | None:
    """How many messages are stored (``None``: no messages table yet)."""
    value = _scalar(db, select(func.count()).select_from(Message))
    return None if value is None else int(value)


def counts(db: orm.Session) -> dict[str, Any]:
    """Sessions (all and live), messages, first/last start time and sessions per source."""
    sessions = select(func.count()).select_from(Session)
    result: dict[str, Any] = {
        "sessions": _scalar(db, sessions),
        "live_sessions": _scalar(db, sessions.where(Session.ended_at.is_(None))),
        "messages": message_total(db),
        "first_started": _scalar(db, select(func.min(Session.started_at))),
        "last_started": _scalar(db, select(func.max(Session.started_at))),
    }
    per_source = (
        select(Session.source, func.count())
        .group_by(Session.source)
        .order_by(func.count().desc(), Session.source)
    )
    try:
        result["sources"] = {str(row[0]): int(row[1]) for row in db.execute(per_source)}
    except sa.exc.DBAPIError:
        db.rollback()
        result["sources"] = {}
    return result


def storage(db: orm.Session) -> dict[str, Any]:
    """The backend's storage figures (SQLite: journal mode, pages; PostgreSQL: size, of the
    profile's schema for a profile)."""
    schema = store_schema(db.get_bind())
    return backend_for(db).storage_facts(lambda sql: _scalar(db, sa.text(sql)), schema=schema)
