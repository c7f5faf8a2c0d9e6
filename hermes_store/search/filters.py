"""Search filters shared by every backend's search module."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SearchFilters:
    """Restrictions applied before ``LIMIT``/``OFFSET``.

    ``sources=[]`` matches nothing; ``exclude_sources=[]`` excludes nothing; an empty
    ``roles`` applies no role filter (upstream's rules).
    """

    sources: Sequence[str] | None = None
    exclude_sources: Sequence[str] | None = None
    roles: Sequence[str] | None = None

    def sql(self) -> tuple[str, dict[str, Any]]:
        """SQL conditions (leading ``AND``) and their parameters (lists expand for ``IN``)."""
        parts: list[str] = []
        params: dict[str, Any] = {}
        if self.sources is not None and not self.sources:
            parts.append("AND 1 = 0")  # an empty include-list matches nothing
        elif self.sources is not None:
            parts.append("AND s.source IN :sources")
            params["sources"] = list(self.sources)
        if self.exclude_sources:
            parts.append("AND s.source NOT IN :exclude_sources")
            params["exclude_sources"] = list(self.exclude_sources)
        if self.roles:
            parts.append("AND m.role IN :roles")
            params["roles"] = list(self.roles)
        return " ".join(parts), params
