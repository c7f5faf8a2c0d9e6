"""Compression leases and compression back-off: the ``SessionDB`` methods.

An agent takes a session's lease before compressing it, so two agents sharing the
session never both end it and start rival continuations; a lease left by a crashed
process expires. After a failed compression the agent records a cooldown on the session,
so that resuming it later does not retry at once.

Like upstream Hermes, the lease writes and the cooldown writes do not raise when the
database fails: they log a warning and answer ``False`` (or nothing), and a caller that
cannot get the lease skips compressing. Argument mistakes and a closed store still raise.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from sqlalchemy.engine import Connection

from hermes_store.api.features.base import DATABASE_ERRORS, FacadeBase
from hermes_store.domain.validation import optional_str, require_seconds, require_str
from hermes_store.repository import compression_locks

log = logging.getLogger(__name__)

T = TypeVar("T")

class CompressionLockMethods(FacadeBase):
    """Per-session compression leases and compression-failure cooldowns."""

    _ASYNC_READS: ClassVar[tuple[str, ...]] = (
        "get_compression_lock_holder",
        "get_compression_failure_cooldown",
    )
    _ASYNC_WRITES: ClassVar[tuple[str, ...]] = (
        "try_acquire_compression_lock",
        "refresh_compression_lock",
        "release_compression_lock",
        "record_compression_failure_cooldown",
        "clear_compression_failure_cooldown",
    )

    def _write_or_warn(self, work: Callable[[Connection], T], operation: str, failed: T) -> T:
        """Run the write; on a database error log a warning and return ``failed``."""
        try:
            return self._write(work, operation)
        except DATABASE_ERRORS as exc:
            log.warning("%s failed: %s", operation, exc)
            return failed

    def try_acquire_compression_lock(self, session_id: str, holder: str, ttl_seconds: float = 300.0) -> bool:
        """Take the session's compression lease for ``holder`` for ``ttl_seconds``.

        ``True`` when ``holder`` now holds it, also when it already did (the lease is not
        extended then; see :meth:`refresh_compression_lock`). ``False`` when another
        holder's lease has not expired, for an empty ``session_id``, or when the database
        fails. An expired lease is taken over, in the same transaction that inserts the
        new one, so of any number of racing callers exactly one wins.
        """
        self._check_open()
        if not session_id:
            return False
        require_str("session_id", session_id)
        require_str("holder", holder)
        ttl = require_seconds("ttl_seconds", ttl_seconds)
        now = time.time()
        return self._write_or_warn(
            lambda db: compression_locks.acquire(db, session_id, holder, now, now + ttl),
            f"acquiring the compression lock of session {session_id}",
            False,
        )

    def refresh_compression_lock(self, session_id: str, holder: str, ttl_seconds: float = 300.0) -> bool:
        """Extend ``holder``'s unexpired lease to ``ttl_seconds`` from now; whether it did
        (an expired or lost lease cannot be extended)."""
        self._check_open()
        if not session_id or not holder:
            return False
        require_str("session_id", session_id)
        require_str("holder", holder)
        ttl = require_seconds("ttl_seconds", ttl_seconds)
        now = time.time()
        return self._write_or_warn(
            lambda db: compression_locks.refresh(db, session_id, holder, now, now + ttl),
            f"refreshing the compression lock of session {session_id}",
            False,
        )

    def release_compression_lock(self, session_id: str, holder: str) -> None:
        """Give up ``holder``'s lease; does nothing when someone else (or nobody) holds it."""
        self._check_open()
        if not session_id:
            return
        require_str("session_id", session_id)
        require_str("holder", holder)
        self._write_or_warn(
            lambda db: compression_locks.release(db, session_id, holder),
            f"releasing the compression lock of session {session_id}",
            None,
        )

    def get_compression_lock_holder(self, session_id: str) -> str | None:
        """Who holds the session's unexpired compression lease, or ``None``."""
        if not session_id:
            return None
        now = time.time()
        return self._query(lambda db: compression_locks.holder_of(db, session_id, now))

    def record_compression_failure_cooldown(
        self, session_id: str, cooldown_until: float, error: str | None = None
    ) -> None:
        """Record that compressing the session should wait until ``cooldown_until`` (epoch
        seconds, stored as given even if already past) and the ``error`` that caused it."""
        self._check_open()
        if not session_id:
            return
        require_str("session_id", session_id)
        until = require_seconds("cooldown_until", cooldown_until)
        optional_str("error", error)
        self._write_or_warn(
            lambda db: compression_locks.set_cooldown(db, session_id, until, error),
            f"recording the compression cooldown of session {session_id}",
            None,
        )

    def get_compression_failure_cooldown(self, session_id: str) -> dict[str, Any] | None:
        """The session's cooldown still running: ``{"cooldown_until", "remaining_seconds",
        "error"}``; ``None`` when there is none, it has passed, or there is no such session.
        A past cooldown stays stored (only :meth:`clear_compression_failure_cooldown`
        removes it)."""
        if not session_id:
            return None
        now = time.time()
        recorded = self._query(lambda db: compression_locks.cooldown_of(db, session_id))
        if recorded is None or recorded[0] is None:
            return None
        until = float(recorded[0])
        if until <= now:
            return None
        return {"cooldown_until": until, "remaining_seconds": until - now, "error": recorded[1]}

    def clear_compression_failure_cooldown(self, session_id: str) -> None:
        """Forget the session's compression cooldown and its error."""
        self._check_open()
        if not session_id:
            return
        require_str("session_id", session_id)
        self._write_or_warn(
            lambda db: compression_locks.clear_cooldown(db, session_id),
            f"clearing the compression cooldown of session {session_id}",
            None,
        )
