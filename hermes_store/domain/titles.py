"""Session-title rules: cleaning user input, numbered lineage suffixes, LIKE escaping.

These are pure string functions; the queries that use them live in the repository layer.
"""

from __future__ import annotations

import re

__all__ = [
    "MAX_TITLE_LENGTH",
    "escape_like",
    "sanitize_title",
    "split_title_number",
]

MAX_TITLE_LENGTH = 100
"""Longest title accepted after cleaning, in code points."""

# Tab, LF and CR are left for the whitespace step so that they become spaces rather than
# gluing the words on either side together.
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# Invisible characters that make two visually identical titles compare unequal: zero-width
# and bidi marks, word joiners and invisible operators, the BOM and the interlinear and
# object-replacement characters.
_FORMAT_CHARS = re.compile("[\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffc]")

_WHITESPACE_RUN = re.compile(r"\s+")

_NUMBER_SUFFIX = re.compile(r"(.*?) #([0-9]+)", re.DOTALL)


def sanitize_title(title: str | None) -> str | None:
    """Clean a user-supplied session title, or return ``None`` when nothing is left.

    Steps, in order: a falsy input gives ``None``; C0 control characters other than tab,
    LF and CR are removed, as is DEL; zero-width, bidi and similar invisible format
    characters are removed; every run of Unicode whitespace becomes one space and both
    ends are trimmed; an empty result gives ``None``.

    :raises ValueError: ``"Title too long (<n> chars, max 100)"`` when the cleaned title is
        longer than :data:`MAX_TITLE_LENGTH` code points.
    """
    if not title:
        return None
    cleaned = _CONTROL_CHARS.sub("", title)
    cleaned = _FORMAT_CHARS.sub("", cleaned)
    cleaned = _WHITESPACE_RUN.sub(" ", cleaned).strip()
    if not cleaned:
        return None
    if len(cleaned) > MAX_TITLE_LENGTH:
        raise ValueError(f"Title too long ({len(cleaned)} chars, max {MAX_TITLE_LENGTH})")
    return cleaned


def split_title_number(title: str) -> tuple[str, int | None]:
    """Split a trailing lineage number off a title.

    ``"my project #3"`` gives ``("my project", 3)``. Only the last `` #<digits>`` suffix is
    removed, so ``"a #1 #2"`` gives ``("a #1", 2)``. A title without such a suffix is
    returned whole with ``None``. Only ASCII digits count: those are the only numbers
    the lineage helpers ever write.
    """
    match = _NUMBER_SUFFIX.fullmatch(title)
    if match is None:
        return title, None
    return match.group(1), int(match.group(2))


def escape_like(text: str) -> str:
    r"""Escape ``\``, ``%`` and ``_`` with a backslash, for ``LIKE ... ESCAPE '\'``."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
