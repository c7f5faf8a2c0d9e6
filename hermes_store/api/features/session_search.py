"""Looking sessions up by id and listing a cron job's runs: the ``SessionDB`` methods."""

from __future__ import annotations

from typing import Any, ClassVar

from hermes_store.api.features.base import FacadeBase
from hermes_store.domain.validation import require_count, require_str
from hermes_store.repository import listing, session_search


class SessionLookupMethods(FacadeBase):
    """Finding a conversation by id; a scheduled job's run history."""

    _ASYNC_READS: ClassVar[tuple[str, ...]] = ("search_sessions_by_id", "list_cron_job_runs")
    _ASYNC_WRITES: ClassVar[tuple[str, ...]] = ()

    def search_sessions_by_id(
        self, query: str, limit: int = 20, include_archived: bool = True
    ) -> list[dict[str, Any]]:
        """Listed conversations (rows as :meth:`list_sessions_rich` gives them) with
        ``query`` (any case, surrounding blanks ignored) in the id of one of their sessions,
        a compression root's id finding its projected tip: exact matches first, then
        prefixes, then the rest, each most recently active first. ``[]`` for a blank query
        or a ``limit`` of 0 or less."""
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError(f"limit must be an int, not {type(limit).__name__}")
        needle = (query or "").strip().lower()
        if not needle or limit <= 0:
            return []
        return self._query(
            lambda db: session_search.sessions_by_id(db, needle, limit, include_archived), snapshot=True
        )

    def list_cron_job_runs(self, job_id: str, limit: int = 20, offset: int = 0) -> list[dict[str, Any]]:
        """The sessions cron job ``job_id`` ran (source ``cron``, id ``cron_<job_id>_…``),
        latest started first, each with ``preview`` and ``last_active``. No listing
        filters apply: archived runs are included."""
        require_str("job_id", job_id)
        require_count("limit", limit)
        require_count("offset", offset)
        return self._query(lambda db: listing.cron_runs(db, job_id, limit, offset))
