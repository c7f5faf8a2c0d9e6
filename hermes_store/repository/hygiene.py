"""Clean-up deletes: chosen sessions, sessions that never held anything, stalled
compression continuations.

A session is *empty* here when it has no message rows at all, whatever their state:
a session compacted down to no live messages still holds its archived history, and
the message counter, which only counts live messages, is never trusted for a delete.

Functions take the caller's connection and never commit; the sweeps work on at most
:data:`~hermes_store.repository.sessions.DELETE_BATCH` sessions a call, so that the
facade can run each batch as its own short transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlalchemy import ColumnElement, and_, delete, exists, func, select, update
from sqlalchemy.orm import aliased

from hermes_store.db.execution import Bind, run
from hermes_store.repository import sessions as session_rows
from hermes_store.schema.models import Message, Session

ORPHANED_COMPRESSION = "orphaned_compression"
"""``end_reason`` given to a compression continuation that was never finished."""
ORPHAN_AGE_S = 7 * 86400.0
"""How old an unfinished compression continuation must be before it is closed."""

_Parent = aliased(Session, name="parent")
_Child = aliased(Session, name="child")


def _has_messages() -> ColumnElement[bool]:
    return exists().where(Message.session_id == Session.id)


def _empty_and_settled() -> ColumnElement[bool]:
    """Ended, not archived, and without a single message row."""
    return and_(Session.ended_at.is_not(None), Session.archived == 0, ~_has_messages())


def delete_requested(db: Bind, ids: Sequence[str], requested: Collection[str]) -> tuple[list[str], list[str]]:
    """Delete those of ``ids`` that exist, with their delegate sub-agents, detaching
    their other children. Returns (the ids deleted, the delegates' ids).

    ``requested``: every id of the caller's whole request; none of them is taken as a
    delegate of another, so each is deleted, and counted, in its own batch.
    """
    existing = list(run(db, select(Session.id).where(Session.id.in_(list(ids)))).scalars())
    if not existing:
        return [], []
    return existing, session_rows.delete_with_delegates(db, existing, requested)


def delete_if_empty(db: Bind, session_id: str) -> bool:
    """Delete the session if it is untitled and has no message and no child; whether it did.

    One statement, so a message or child written meanwhile by another connection keeps
    the session.
    """
    statement = delete(Session).where(
        Session.id == session_id,
        Session.title.is_(None),
        ~_has_messages(),
        ~exists().where(_Child.parent_session_id == Session.id),
    )
    return bool(run(db, statement).rowcount)


def count_empty(db: Bind) -> int:
    """How many sessions :func:`delete_empty_batch` would delete, all batches together."""
    return int(run(db, select(func.count()).select_from(Session).where(_empty_and_settled())).scalar_one())


def delete_empty_batch(db: Bind) -> list[str]:
    """Delete up to :data:`DELETE_BATCH` ended, unarchived sessions without any message,
    detaching their children (sub-agents included: they may hold work of their own).
    Returns the ids deleted; fewer than the batch size means none is left."""
    query = (
        select(Session.id).where(_empty_and_settled()).order_by(Session.id).limit(session_rows.DELETE_BATCH)
    )
    ids = list(run(db, query).scalars())
    session_rows.delete_sessions(db, ids)
    return ids


def finalize_orphaned_compression(db: Bind, now: float) -> int:
    """End, with reason ``orphaned_compression``, every compression continuation left
    open: never called the model, started over a week before ``now``, holding messages,
    and whose parent ended by compression. Returns how many were ended; no message is
    touched."""
    parent_compressed = exists().where(
        _Parent.id == Session.parent_session_id,
        _Parent.end_reason == "compression",
        _Parent.ended_at.is_not(None),
    )
    statement = (
        update(Session)
        .where(
            Session.api_call_count == 0,
            Session.end_reason.is_(None),
            Session.ended_at.is_(None),
            Session.started_at < now - ORPHAN_AGE_S,
            Session.parent_session_id.is_not(None),
            parent_compressed,
            _has_messages(),
        )
        .values(ended_at=now, end_reason=ORPHANED_COMPRESSION)
    )
    return int(run(db, statement).rowcount)
