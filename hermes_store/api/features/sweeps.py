"""Deleting many sessions in short transactions: the loop every sweep and prune shares.

``delete_empty_sessions``, ``prune_sessions`` and ``prune_empty_ghost_sessions`` each name
the batch they delete (a repository function); :func:`sweep_in_batches` runs it until
nothing is left, stepping aside between batches, and removes the transcript files of what
went.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from sqlalchemy.engine import Connection

from hermes_store.api.features.base import FacadeBase
from hermes_store.domain.transcripts import remove_transcripts

SessionsDir = str | os.PathLike[str] | None

BATCH_PAUSE_MIN_S = 0.005
BATCH_PAUSE_MAX_S = 0.05
"""Bounds of a sweep's pause between batches (it pauses as long as the batch took):
long enough for a writer polling SQLite's lock to find it free, short enough that a
sweep of a million messages is not made slower by much."""


def sweep_in_batches(
    store: FacadeBase,
    delete_batch: Callable[[Connection], list[str]],
    operation: str,
    sessions_dir: SessionsDir,
    progress: Callable[[int], None] | None = None,
) -> list[str]:
    """Run ``delete_batch`` (deletes a bounded batch of sessions, returns their ids) on
    ``store``, one write transaction each, until a batch finds nothing left; the ids
    deleted. Their transcript files in ``sessions_dir`` are removed afterwards, also when
    a batch fails part-way (the earlier batches stay deleted).

    Between batches the sweep steps aside for a moment (:data:`BATCH_PAUSE_MIN_S`, or
    as long as the batch took, up to :data:`BATCH_PAUSE_MAX_S`), so that the writers
    that queued behind a batch — this process's threads, or other processes polling
    SQLite's lock — get their turn before the next one. ``progress`` is told the
    number of sessions deleted so far after each batch."""
    removed: list[str] = []
    try:
        while True:
            started = time.perf_counter()
            batch = store._write(delete_batch, operation)
            if not batch:
                return removed
            removed += batch
            if progress is not None:
                progress(len(removed))
            took = time.perf_counter() - started
            store._step_aside(min(BATCH_PAUSE_MAX_S, max(BATCH_PAUSE_MIN_S, took)))
    finally:
        remove_transcripts(sessions_dir, removed)
