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
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from hermes_store.api.features.base import FacadeBase
from hermes_store.domain.transcripts import remove_transcripts

SessionsDir = str | os.PathLike[str] | None

BATCH_TARGET_S = 0.025
"""How long one batch of a sweep that deletes messages should hold the write lock: the
longest a live agent's append then waits behind it, whatever the store's size or load."""


FIRST_BATCH = 200
"""Messages in a sweep's first batch, before any has been timed."""
SMALLEST_BATCH = 20


@dataclass
class TimedBudget:
    """How much the next batch of a sweep deletes (messages for a prune, sessions for a
    bulk delete), sized by how long the last batch took: scaled toward
    :data:`BATCH_TARGET_S` (at most doubled per batch, so a quick batch on an idle store
    does not make the next one overshoot on a busy one), between ``low`` and ``high``,
    starting at ``first``."""

    high: int
    low: int = SMALLEST_BATCH
    first: int = FIRST_BATCH
    size: int = 0

    def __post_init__(self) -> None:
        self.low = min(self.low, self.high)
        self.size = max(self.low, min(self.first, self.high))

    def adapt(self, took_s: float) -> None:
        """Size the next batch after one that took ``took_s`` seconds."""
        proposed = self.size * BATCH_TARGET_S / max(took_s, 0.001)
        self.size = int(min(self.high, max(self.low, min(2 * self.size, proposed))))

BATCH_PAUSE_MIN_S = 0.005
BATCH_PAUSE_MAX_S = 0.05
"""Bounds of a sweep's pause between batches (it pauses as long as the batch took):
long enough for a writer polling SQLite's lock to find it free, short enough that a
sweep of a million messages is not made slower by much."""


def sweep_in_batches(
    store: FacadeBase,
    delete_batch: Callable[[Connection], list[str] | None],
    operation: str,
    sessions_dir: SessionsDir,
    progress: Callable[[int], None] | None = None,
    budget: TimedBudget | None = None,
) -> list[str]:
    """Run ``delete_batch`` (deletes a bounded batch of sessions, returns their ids;
    ``None`` when it deleted only part of one, to be called again) on ``store``, one write
    transaction each, until a batch finds nothing left; the ids deleted. Their transcript
    files in ``sessions_dir`` are removed afterwards, also when a batch fails part-way (the
    earlier batches stay deleted). ``budget``, read by ``delete_batch``, is sized after
    each batch by how long it took.

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
            took = time.perf_counter() - started
            if budget is not None:
                budget.adapt(took)
            if batch is not None:
                if not batch:
                    return removed
                removed += batch
                if progress is not None:
                    progress(len(removed))
            store._step_aside(min(BATCH_PAUSE_MAX_S, max(BATCH_PAUSE_MIN_S, took)))
    finally:
        remove_transcripts(sessions_dir, removed)
