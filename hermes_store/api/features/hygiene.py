"""Deleting chosen sessions and sweeping away the ones that never held anything."""

from __future__ import annotations

import time
from collections.abc import Iterable
from functools import partial
from typing import ClassVar

from hermes_store.api.features.base import FacadeBase
from hermes_store.api.features.sweeps import SessionsDir, TimedBudget, sweep_in_batches
from hermes_store.domain.transcripts import remove_transcripts
from hermes_store.repository import hygiene
from hermes_store.repository import sessions as session_rows

BULK_FIRST_BATCH = 10
"""Sessions in a bulk delete's first batch, before any has been timed (they may be long)."""


class HygieneMethods(FacadeBase):
    """Bulk and clean-up deletes (the dashboard's "delete selected" and "delete empty",
    the CLI's discard on exit).

    Work on many sessions runs in batches of at most
    :data:`~hermes_store.repository.sessions.DELETE_BATCH`, each its own transaction: a
    session always goes together with its messages and delegate sub-agents, and a failure
    part-way leaves the earlier batches done. A bulk delete sizes its batches by how long
    they take (:class:`~hermes_store.api.features.sweeps.TimedBudget`), starting at
    :data:`BULK_FIRST_BATCH` sessions. Transcript files of what was deleted are
    removed afterwards, also after such a failure.
    """

    _ASYNC_READS: ClassVar[tuple[str, ...]] = ("count_empty_sessions",)
    _ASYNC_WRITES: ClassVar[tuple[str, ...]] = (
        "delete_sessions",
        "delete_session_if_empty",
        "delete_empty_sessions",
        "finalize_orphaned_compression_sessions",
    )

    def delete_sessions(self, session_ids: Iterable[str], sessions_dir: SessionsDir = None) -> int:
        """Delete the listed sessions that exist, as :meth:`delete_session` does each one.

        Entries that are not non-empty strings are ignored and duplicates count once.
        Returns how many of the listed sessions existed; delegate sub-agents deleted with
        them are not counted. A list of any length is fine. A single ``str`` raises
        ``TypeError`` (it would otherwise be read as a list of one-letter ids).
        """
        if isinstance(session_ids, str | bytes):
            raise TypeError("session_ids must be a list of ids, not a single string")
        wanted = list(dict.fromkeys(sid for sid in session_ids or () if isinstance(sid, str) and sid))
        requested = frozenset(wanted)
        deleted = 0
        removed: list[str] = []
        # Sessions a batch, sized by time: their messages go with them, however many.
        budget = TimedBudget(high=session_rows.DELETE_BATCH, low=1, first=BULK_FIRST_BATCH)
        try:
            start = 0
            while start < len(wanted):
                batch = wanted[start : start + budget.size]
                started = time.perf_counter()
                existing, delegates = self._write(
                    partial(hygiene.delete_requested, ids=batch, requested=requested),
                    "deleting sessions",
                )
                budget.adapt(time.perf_counter() - started)
                start += len(batch)
                deleted += len(existing)
                removed += existing + delegates
        finally:
            remove_transcripts(sessions_dir, removed)
        return deleted

    def delete_session_if_empty(self, session_id: str, sessions_dir: SessionsDir = None) -> bool:
        """Delete the session only if it never got anything worth resuming: no title, no
        message (in any state) and no child session. Returns whether it was deleted;
        a live session is deleted too (this is for a CLI that is quitting)."""
        if not isinstance(session_id, str) or not session_id:
            return False
        deleted = self._write(
            lambda db: hygiene.delete_if_empty(db, session_id), "discarding an empty session"
        )
        if deleted:
            remove_transcripts(sessions_dir, [session_id])
        return deleted

    def count_empty_sessions(self) -> int:
        """How many sessions :meth:`delete_empty_sessions` would delete now."""
        return self._query(hygiene.count_empty)

    def delete_empty_sessions(self, sessions_dir: SessionsDir = None) -> int:
        """Delete every ended, unarchived session that has no message row at all; returns
        how many. Their children are detached, not deleted.

        A session compacted down to no live messages still holds its archived history
        and is kept.
        """
        return len(
            sweep_in_batches(self, hygiene.delete_empty_batch, "deleting empty sessions", sessions_dir)
        )

    def finalize_orphaned_compression_sessions(self) -> int:
        """End the compression continuations that were left open (see
        :func:`~hermes_store.repository.hygiene.finalize_orphaned_compression`); returns
        how many. Nothing is deleted."""
        now = time.time()
        return self._write(
            lambda db: hygiene.finalize_orphaned_compression(db, now),
            "finishing orphaned compression sessions",
        )
