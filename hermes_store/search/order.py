"""The order of a search's hits: by relevance (each path's own), or by message time."""

from __future__ import annotations

from typing import Literal

__all__ = ["SearchOrder", "search_order"]

SearchOrder = Literal["rank", "newest", "oldest"]
"""``rank``: each path's own order (best match first for words, newest first for
substrings); ``newest``/``oldest``: by message ``timestamp``, that order breaking ties."""


def search_order(sort: object) -> SearchOrder:
    """The order ``sort`` asks for: ``"newest"`` or ``"oldest"`` in any case and with any
    surrounding whitespace; anything else, ``None`` and non-strings included, is ``rank``.

    Upstream Hermes accepts any value here so callers can pass a user's choice through
    unchecked; so do we.
    """
    if isinstance(sort, str):
        wanted = sort.strip().lower()
        if wanted == "newest":
            return "newest"
        if wanted == "oldest":
            return "oldest"
    return "rank"
