"""Search filters shared by every backend's search module."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hermes_store.db.backends import Backend


SEARCHABLE_STATE = "(m.active = 1 OR m.compacted = 1)"
"""Which messages a default search sees: live ones and those archived by compaction."""


@dataclass(frozen=True)
class SearchFilters:
    """Restrictions applied before ``LIMIT``/``OFFSET``.

    ``sources=[]`` matches nothing; ``exclude_sources=[]`` excludes nothing; an empty
    ``roles`` applies no role filter (upstream's rules). Unless ``include_inactive``, a
    message must be live (``active = 1``) or archived by compaction (``compacted = 1``):
    rewound messages, which the user took back, are never hits.
    """

    sources: Sequence[str] | None = None
    exclude_sources: Sequence[str] | None = None
    roles: Sequence[str] | None = None
    include_inactive: bool = False
    backend: Backend | None = field(default=None, compare=False)
    """The store's backend: lists then bind as one value (:meth:`Backend.in_list`),
    which keeps the search statement on the lean execution path."""

    def sql(self) -> tuple[str, dict[str, Any]]:
        """SQL conditions (leading ``AND``) and their parameters."""
        parts: list[str] = []
        params: dict[str, Any] = {}
        if self.sources is not None and not self.sources:
            parts.append("AND 1 = 0")  # an empty include-list matches nothing
        elif self.sources is not None:
            parts.append("AND " + self._in("s.source", "sources", self.sources, params))
        if self.exclude_sources:
            condition = self._in("s.source", "exclude_sources", self.exclude_sources, params)
            parts.append(f"AND NOT ({condition})")
        if self.roles:
            parts.append("AND " + self._in("m.role", "roles", self.roles, params))
        if not self.include_inactive:
            # Tested on the row itself (no index holds the flags): nearly every message
            # is live, so the condition never changes which index a plan reads.
            parts.append(f"AND {SEARCHABLE_STATE}")
        return " ".join(parts), params

    def _in(self, expression: str, name: str, values: Sequence[str], params: dict[str, Any]) -> str:
        if self.backend is None:
            params[name] = list(values)  # an expanding IN parameter
            return f"{expression} IN :{name}"
        params[name] = self.backend.list_value(values)
        return self.backend.in_list(expression, name)
