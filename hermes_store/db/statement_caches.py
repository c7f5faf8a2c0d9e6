"""The bounded caches the execution seam keeps per SQL text.

Search builds a new SQL text per query shape, so the keys of every statement cache grow
with what users type: each cache keeps at most :data:`STATEMENT_CACHE_SIZE` entries and
drops the least recently used first.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

STATEMENT_CACHE_SIZE = 512
"""Entries each statement cache keeps (the least recently used goes first)."""

K = TypeVar("K")
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    """A mapping of at most ``capacity`` entries that drops the least recently used.

    Safe to share between threads without a lock: an entry another thread evicted
    between two steps is simply missing (computed again), never an error.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value for ``key`` (now the most recently used), or ``None``."""
        value = self._entries.get(key)
        if value is not None:
            # Per statement: a plain try costs nothing here, contextlib.suppress ~0.5 µs.
            try:  # noqa: SIM105
                self._entries.move_to_end(key)
            except KeyError:  # evicted by another thread meanwhile; the value still holds
                pass
        return value

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` for ``key``, evicting the least recently used past capacity."""
        self._entries[key] = value
        while len(self._entries) > self.capacity:
            try:
                self._entries.popitem(last=False)
            except KeyError:  # emptied by another thread meanwhile
                break

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()
