"""Detect CJK text, which the word tokenizer cannot split and search must route elsewhere.

The ranges are upstream's seven blocks plus the ones this store adds: CJK Extensions
C to I, the compatibility ideographs, half-width katakana and the Hangul Jamo blocks.
"""

from __future__ import annotations

from bisect import bisect_right

__all__ = ["CJK_RANGES", "contains_cjk", "count_cjk", "is_cjk_codepoint"]

CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x3000, 0x303F),  # CJK Symbols and Punctuation
    (0x3040, 0x309F),  # Hiragana
    (0x30A0, 0x30FF),  # Katakana
    (0x3130, 0x318F),  # Hangul Compatibility Jamo
    (0x3400, 0x4DBF),  # CJK Unified Ideographs Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xA960, 0xA97F),  # Hangul Jamo Extended-A
    (0xAC00, 0xD7AF),  # Hangul Syllables
    (0xD7B0, 0xD7FF),  # Hangul Jamo Extended-B
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    (0xFF65, 0xFF9F),  # Halfwidth Katakana
    (0x20000, 0x2A6DF),  # Extension B
    (0x2A700, 0x2EE5F),  # Extensions C, D, E, F and I
    (0x2F800, 0x2FA1F),  # CJK Compatibility Ideographs Supplement
    (0x30000, 0x323AF),  # Extensions G and H
)
"""Inclusive code-point ranges counted as CJK, sorted and non-overlapping."""

_STARTS = tuple(start for start, _ in CJK_RANGES)


def is_cjk_codepoint(cp: int) -> bool:
    """Return whether the code point ``cp`` falls in one of :data:`CJK_RANGES`."""
    index = bisect_right(_STARTS, cp) - 1
    return index >= 0 and cp <= CJK_RANGES[index][1]


def contains_cjk(text: str) -> bool:
    """Return whether ``text`` has at least one CJK character."""
    return any(is_cjk_codepoint(ord(char)) for char in text)


def count_cjk(text: str) -> int:
    """Return how many characters of ``text`` are CJK."""
    return sum(1 for char in text if is_cjk_codepoint(ord(char)))
