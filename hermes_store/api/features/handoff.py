"""Cross-platform handoff: the ``SessionDB`` methods.

A terminal asks for a session to continue on a messaging platform
(:meth:`~HandoffMethods.request_handoff`) and polls its state; a gateway lists the
pending handoffs, claims one (only one gateway can), and completes or fails it.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from hermes_store.api.features.base import DATABASE_ERRORS, FacadeBase
from hermes_store.domain.validation import require_str
from hermes_store.repository import handoff

log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 500
"""How much of a failed handoff's error is kept."""


class HandoffMethods(FacadeBase):
    """The handoff state machine on ``sessions.handoff_state``."""

    _ASYNC_READS: ClassVar[tuple[str, ...]] = ("get_handoff_state", "list_pending_handoffs")
    _ASYNC_WRITES: ClassVar[tuple[str, ...]] = (
        "request_handoff",
        "claim_handoff",
        "complete_handoff",
        "fail_handoff",
    )

    def request_handoff(self, session_id: str, platform: str) -> bool:
        """Ask for the session to move to ``platform``: its state becomes ``pending``.

        ``False`` (and nothing changes) when a handoff of the session is already pending or
        running, or the session does not exist; a finished one (completed or failed) may
        be followed by a new request, which clears the old error.
        """
        require_str("session_id", session_id)
        require_str("platform", platform)
        return self._write(lambda db: handoff.request(db, session_id, platform), "requesting a handoff")

    def get_handoff_state(self, session_id: str) -> dict[str, Any] | None:
        """``{"state", "platform", "error"}`` of the session (all ``None`` before any
        handoff); ``None`` when there is no such session or the database fails."""
        try:
            return self._query(lambda db: handoff.state_of(db, session_id))
        except DATABASE_ERRORS as exc:
            log.warning("reading the handoff state of session %s failed: %s", session_id, exc)
            return None

    def list_pending_handoffs(self) -> list[dict[str, Any]]:
        """Every session waiting for a gateway to take it over (all its columns), oldest
        session first; ``[]`` when the database fails."""
        try:
            return self._query(handoff.pending)
        except DATABASE_ERRORS as exc:
            log.warning("listing pending handoffs failed: %s", exc)
            return []

    def claim_handoff(self, session_id: str) -> bool:
        """Take a pending handoff (it becomes ``running``); whether this call took it. Of
        gateways racing for one handoff exactly one gets ``True``."""
        require_str("session_id", session_id)
        return self._write(lambda db: handoff.claim(db, session_id), "claiming a handoff")

    def complete_handoff(self, session_id: str) -> None:
        """Mark the session's handoff ``completed`` and clear its error, from any state."""
        require_str("session_id", session_id)
        self._write(
            lambda db: handoff.finish(db, session_id, handoff.COMPLETED, None), "completing a handoff"
        )

    def fail_handoff(self, session_id: str, error: str) -> None:
        """Mark the session's handoff ``failed``, keeping the first 500 characters of
        ``error`` (which must be a ``str``), from any state."""
        require_str("session_id", session_id)
        reason = require_str("error", error)[:MAX_ERROR_CHARS]
        self._write(lambda db: handoff.finish(db, session_id, handoff.FAILED, reason), "failing a handoff")
