"""Cross-platform handoff: a session's move to another platform, as a small state machine.

``sessions.handoff_state`` goes from NULL (or a finished ``completed``/``failed``) to
``pending`` when a handoff is asked for, to ``running`` when one gateway claims it, and
ends ``completed`` or ``failed`` (with ``handoff_error``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import or_, select, update

from hermes_store.db.execution import Bind, run
from hermes_store.schema.models import Session

PENDING = "pending"
RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"


def request(db: Bind, session_id: str, platform: str) -> bool:
    """Mark the session pending for ``platform`` unless a handoff is already under way;
    whether it was marked (``False`` also for a missing session)."""
    result = run(
        db,
        update(Session)
        .where(
            Session.id == session_id,
            or_(Session.handoff_state.is_(None), Session.handoff_state.in_((COMPLETED, FAILED))),
        )
        .values(handoff_state=PENDING, handoff_platform=platform, handoff_error=None),
    )
    return int(result.rowcount) > 0


def state_of(db: Bind, session_id: str) -> dict[str, Any] | None:
    """``{"state", "platform", "error"}`` of the session, or ``None`` without the session."""
    statement = select(Session.handoff_state, Session.handoff_platform, Session.handoff_error).where(
        Session.id == session_id
    )
    row = run(db, statement).first()
    if row is None:
        return None
    return {"state": row[0], "platform": row[1], "error": row[2]}


def pending(db: Bind) -> list[dict[str, Any]]:
    """Every session waiting for a handoff (all columns), the longest-waiting session first."""
    statement = (
        select(*Session.__table__.columns)
        .where(Session.handoff_state == PENDING)
        .order_by(Session.started_at, Session.id)
    )
    return [dict(row) for row in run(db, statement).mappings()]


def claim(db: Bind, session_id: str) -> bool:
    """Move a pending handoff to running; whether this call did (only one claimer can)."""
    result = run(
        db,
        update(Session)
        .where(Session.id == session_id, Session.handoff_state == PENDING)
        .values(handoff_state=RUNNING),
    )
    return int(result.rowcount) > 0


def finish(db: Bind, session_id: str, state: str, error: str | None) -> None:
    """End the session's handoff in ``state`` (whatever state it was in) with ``error``."""
    run(db, update(Session).where(Session.id == session_id).values(handoff_state=state, handoff_error=error))
