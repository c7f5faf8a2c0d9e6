"""Finding a conversation by (part of) a session id, as pasted from logs or another tool."""

from __future__ import annotations

from typing import Any

from hermes_store.db.execution import Bind
from hermes_store.repository import listing

# How many listing rows are ranked per row asked for: the listing orders by activity,
# the ranking by how well the id matches, so it needs some rows to choose from.
CANDIDATES_PER_RESULT = 4


def sessions_by_id(db: Bind, needle: str, limit: int, include_archived: bool) -> list[dict[str, Any]]:
    """Listed conversations (as ``list_sessions_rich`` shows them, most recently active
    first) whose compression chain has a session id containing ``needle`` (any case):
    first those whose id or ``_lineage_root_id`` equals it, then those where one starts
    with it, then the rest, each group in activity order; at most ``limit``.

    Only the ``4 × limit`` most recently active matches are ranked, so an exact match
    older than that many substring matches is not found.
    """
    candidates = listing.rich_listing(
        db,
        listing.ListingFilter(include_archived=include_archived),
        limit * CANDIDATES_PER_RESULT,
        0,
        order_by_last_active=True,
        match=listing.ChainMatch(id_query=needle),
    )
    lowered = needle.lower()

    def closeness(row: dict[str, Any]) -> int:
        ids = [str(value).lower() for value in (row.get("id"), row.get("_lineage_root_id")) if value]
        if lowered in ids:
            return 0
        if any(value.startswith(lowered) for value in ids):
            return 1
        return 2

    # sorted() is stable: within a group the activity order stays.
    return sorted(candidates, key=closeness)[:limit]
