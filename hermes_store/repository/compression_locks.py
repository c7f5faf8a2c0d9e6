"""Compression leases (``compression_locks``) and the per-session compression back-off.

A lease keeps two agents that share a session id from compressing it at the same time
(each would end the session and start its own continuation). The functions take the
clock reading ``now`` from the caller so that one call compares and stamps with a single
instant. They never commit; the lease functions are meant to run in one write
transaction each.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select, update

from hermes_store.db.backends import backend_for
from hermes_store.db.execution import Bind, run
from hermes_store.schema.models import CompressionLock, Session


def acquire(db: Bind, session_id: str, holder: str, now: float, expires_at: float) -> bool:
    """Take the session's lease for ``holder`` unless someone else holds an unexpired one.

    An expired lease is removed first, then a new one is inserted if none is left; the
    answer is whether the lease now belongs to ``holder``, so asking again while holding
    it answers ``True`` (without extending it). On PostgreSQL a competing transaction's
    insert waits on the first one's row, then finds it and inserts nothing.
    """
    run(
        db,
        delete(CompressionLock).where(
            CompressionLock.session_id == session_id, CompressionLock.expires_at < now
        ),
    )
    insert = backend_for(db).insert(CompressionLock)
    run(
        db,
        insert.values(
            session_id=session_id, holder=holder, acquired_at=now, expires_at=expires_at
        ).on_conflict_do_nothing(index_elements=["session_id"]),
    )
    current = run(db, select(CompressionLock.holder).where(CompressionLock.session_id == session_id)).scalar()
    return current == holder


def refresh(db: Bind, session_id: str, holder: str, now: float, expires_at: float) -> bool:
    """Move an unexpired lease of ``holder`` to ``expires_at``; whether there was one."""
    result = run(
        db,
        update(CompressionLock)
        .where(
            CompressionLock.session_id == session_id,
            CompressionLock.holder == holder,
            CompressionLock.expires_at >= now,
        )
        .values(expires_at=expires_at),
    )
    return int(result.rowcount) > 0


def release(db: Bind, session_id: str, holder: str) -> None:
    """Remove the session's lease if ``holder`` holds it (expired or not)."""
    run(
        db,
        delete(CompressionLock).where(
            CompressionLock.session_id == session_id, CompressionLock.holder == holder
        ),
    )


def holder_of(db: Bind, session_id: str, now: float) -> str | None:
    """Who holds the session's unexpired lease, or ``None``."""
    statement = select(CompressionLock.holder).where(
        CompressionLock.session_id == session_id, CompressionLock.expires_at >= now
    )
    value = run(db, statement).scalar()
    return None if value is None else str(value)


def set_cooldown(db: Bind, session_id: str, cooldown_until: Any, error: Any) -> None:
    """Record until when compression of the session should not be tried again, and why."""
    run(
        db,
        update(Session)
        .where(Session.id == session_id)
        .values(compression_failure_cooldown_until=cooldown_until, compression_failure_error=error),
    )


def cooldown_of(db: Bind, session_id: str) -> tuple[float | None, str | None] | None:
    """The session's recorded ``(cooldown_until, error)``, or ``None`` without the session."""
    statement = select(Session.compression_failure_cooldown_until, Session.compression_failure_error).where(
        Session.id == session_id
    )
    row = run(db, statement).first()
    return None if row is None else (row[0], row[1])


def clear_cooldown(db: Bind, session_id: str) -> None:
    """Forget the session's compression back-off."""
    set_cooldown(db, session_id, None, None)
