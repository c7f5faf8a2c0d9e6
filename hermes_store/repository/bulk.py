"""Whole-session copies in and out of a store: id paging, exact inserts, late parent links.

For tools that move sessions between stores (``hermes-store export``/``import``). Rows
are written exactly as given — ids, timestamps and counters included — so an export
imported into an empty store exports identically (on PostgreSQL, finish with the
backend's ``after_bulk_copy`` to move the id sequence on). Call these inside
``SessionDB.unit_of_work.read()`` / ``.write()``; they never commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, insert, or_, orm, select, update

from hermes_store.schema.models import Message, Session


def session_ids_page(
    db: orm.Session, source: str | None, after: tuple[float, str] | None, limit: int
) -> list[tuple[float, str]]:
    """The next ``limit`` (started_at, id) pairs after ``after``, oldest first (keyset paging)."""
    query = select(Session.started_at, Session.id).order_by(Session.started_at, Session.id).limit(limit)
    if source:
        query = query.where(Session.source == source)
    if after is not None:
        query = query.where(
            or_(Session.started_at > after[0], and_(Session.started_at == after[0], Session.id > after[1]))
        )
    return [(float(row[0]), str(row[1])) for row in db.execute(query)]


def existing_ids(db: orm.Session, ids: Sequence[str]) -> set[str]:
    """Which of ``ids`` are stored sessions."""
    if not ids:
        return set()
    return set(db.execute(select(Session.id).where(Session.id.in_(ids))).scalars())


def insert_session(db: orm.Session, values: dict[str, Any], messages: Sequence[dict[str, Any]]) -> None:
    """Insert one session row and its message rows exactly as given (columns by name)."""
    db.execute(insert(Session).values(**values))
    if messages:
        db.execute(insert(Message), list(messages))


def link_parents(db: orm.Session, wanted: dict[str, str]) -> dict[str, str]:
    """Set each child's ``parent_session_id`` if that parent is stored; return the rest.

    ``wanted`` maps child id → parent id; the result holds the children whose parent
    is not stored yet.
    """
    if not wanted:
        return {}
    present = existing_ids(db, sorted(set(wanted.values())))
    waiting = {}
    for child, parent in wanted.items():
        if parent in present:
            db.execute(update(Session).where(Session.id == child).values(parent_session_id=parent))
        else:
            waiting[child] = parent
    return waiting
