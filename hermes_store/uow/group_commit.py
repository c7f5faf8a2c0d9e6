"""Group commit: writes that queue while a commit is in flight share the next transaction.

A write to SQLite costs one ``fsync`` at ``COMMIT``; while it waits for the disk, the other
writers of the process wait for the writer lock. Instead of each then paying for its own
transaction and ``fsync`` in turn, every write joins a queue (:class:`WriteQueue`) before
taking the lock, and whoever gets the lock next runs *every* queued write in one
transaction, commits once, and hands each write its own outcome
(:class:`QueuedWrite`). The writers whose writes were in the group wake up with their
results and never touch the lock. The unit of work (:mod:`hermes_store.uow.unit_of_work`) does the
running; this module holds the queue and the per-write bookkeeping.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class QueuedWrite(Generic[T]):
    """One write waiting for (or done in) a group's transaction, with its own outcome.

    Each write keeps its own attempt count and reconnect deadline, so a write that joined a
    retried group late has as many attempts as one that ran alone.
    """

    __slots__ = (
        "abandoned",
        "conflicts",
        "done",
        "error",
        "operation",
        "reconnect_deadline",
        "result",
        "sealed",
        "with_session",
        "work",
    )

    def __init__(self, work: Callable[[Any], T], operation: str, with_session: bool) -> None:
        self.work = work
        self.operation = operation
        self.with_session = with_session
        self.conflicts = 0
        self.reconnect_deadline: float | None = None
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None
        # Sealed: in a group whose COMMIT is under way, so its outcome is that commit's.
        # Abandoned: its caller was interrupted meanwhile, so a retry must not run it.
        self.sealed = False
        self.abandoned: BaseException | None = None

    def succeed(self, result: T) -> None:
        """Record the committed result."""
        self.result = result
        self.done = True

    def fail(self, error: BaseException) -> None:
        """Record the error this write's caller will see."""
        self.error = error
        self.done = True

    def outcome(self) -> T:
        """The result, or raise the error (in the caller's own thread or task)."""
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]


class WriteQueue:
    """Writes waiting for their transaction, in arrival order (thread-safe).

    The write at the front is the *leader*: its thread takes the writer lock and runs every
    write queued at that moment as one group, while the others sleep until theirs is done.
    A write leaves the queue only once it is done, so the one at the front after a group
    ends — the first that arrived after that group was taken, or one a retry left
    unfinished — leads the next. Arrival order is the order a group runs its writes in, so
    appends to one session keep their order.
    """

    def __init__(self) -> None:
        self.waiting: deque[QueuedWrite[Any]] = deque()
        """The queued writes, oldest first (read it without the lock only to see whether
        any is there)."""
        # Both conditions share one lock; the paths that never wait take it directly
        # (``with self._mutex``: the C lock, without the Condition's Python-level enter/exit).
        self._mutex = threading.Lock()
        self._changed = threading.Condition(self._mutex)  # followers: a group ended
        self._grown = threading.Condition(self._mutex)  # the leader: a write arrived

    def __len__(self) -> int:
        return len(self.waiting)

    def wait_for_turn(self, writes: list[QueuedWrite[Any]]) -> bool:
        """Queue ``writes`` (one caller's, in order) and sleep until all are done
        (``False``) or one of them leads (``True``)."""
        with self._mutex:
            alone = not self.waiting
            self.waiting.extend(writes)
            if alone:
                # Lead at once. No leader waits for arrivals (its writes would be queued),
                # so there is no one to tell.
                return True
            self._grown.notify()
            try:
                while not all(write.done for write in writes) and not _holds(writes, self.waiting[0]):
                    self._changed.wait()
            except BaseException as exc:
                # Interrupted while waiting (KeyboardInterrupt in the main thread): the
                # writes are withdrawn — neither this group's COMMIT nor a later group
                # takes them — and, were one at the front, the next write must lead
                # instead. A write whose group is already committing cannot be withdrawn:
                # it keeps that commit's outcome, and is dropped if that commit fails.
                for write in writes:
                    if write.sealed:
                        write.abandoned = exc
                    elif not write.done:
                        write.fail(exc)
                self.waiting = deque(w for w in self.waiting if not w.done)
                self._changed.notify_all()
                raise
            return not all(write.done for write in writes)

    def seal(self, group: list[QueuedWrite[Any]]) -> bool:
        """The leader, about to commit ``group``: seal its writes, unless a caller withdrew
        one meanwhile (``False``: the attempt must be rolled back and run without it)."""
        with self._mutex:
            if any(write.done for write in group):
                return False
            for write in group:
                write.sealed = True
            return True

    def unseal(self, group: list[QueuedWrite[Any]]) -> None:
        """The commit of a sealed ``group`` failed: its writes may be withdrawn again, and
        those whose caller was interrupted meanwhile are withdrawn now."""
        with self._mutex:
            for write in group:
                write.sealed = False
                if write.abandoned is not None and not write.done:
                    write.fail(write.abandoned)

    def gather(self, expected: int, timeout: float) -> None:
        """The leader: wait up to ``timeout`` s until ``expected`` writes are queued (the
        writers of the last group are usually about to send their next)."""
        with self._grown:
            self._grown.wait_for(lambda: sum(not w.done for w in self.waiting) >= expected, timeout)

    def pending(self) -> list[QueuedWrite[Any]]:
        """Every queued write not yet done, oldest first (the leader's next group)."""
        writes = self.waiting
        if len(writes) == 1:
            # Only the leader's own write: no lock needed, as other writers only ever add
            # to the queue (one that does so now joins the next group).
            only = writes[0]
            return [] if only.done else [only]
        with self._mutex:
            return [write for write in self.waiting if not write.done]

    def release(self) -> None:
        """Drop the writes that are done and wake their callers (and the next leader)."""
        with self._mutex:
            queue = self.waiting
            if len(queue) == 1 and queue[0].done:
                # The lone writer's own write: nobody else is queued, so nobody waits.
                queue.clear()
                return
            self.waiting = deque(write for write in queue if not write.done)
            self._changed.notify_all()


def _holds(writes: list[QueuedWrite[Any]], front: QueuedWrite[Any]) -> bool:
    # By identity: a write is one call's, never equal to another's.
    return any(write is front for write in writes)
