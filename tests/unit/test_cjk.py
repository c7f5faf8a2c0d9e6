"""CJK detection: upstream's ranges plus the ones hermes_store adds."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_store.search.cjk import CJK_RANGES, contains_cjk, count_cjk, is_cjk_codepoint

# (first, last) code point of each range upstream already recognises.
UPSTREAM_RANGES = [
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x3000, 0x303F),
    (0x3040, 0x309F),
    (0x30A0, 0x30FF),
    (0xAC00, 0xD7AF),
]

ADDED_RANGES = [
    (0x2A700, 0x2B73F),  # Extension C
    (0x2B740, 0x2B81F),  # Extension D
    (0x2B820, 0x2CEAF),  # Extension E
    (0x2CEB0, 0x2EBEF),  # Extension F
    (0x2EBF0, 0x2EE5F),  # Extension I
    (0x30000, 0x3134F),  # Extension G
    (0x31350, 0x323AF),  # Extension H
    (0xF900, 0xFAFF),  # compatibility ideographs
    (0x2F800, 0x2FA1F),  # compatibility ideographs supplement
    (0xFF65, 0xFF9F),  # half-width katakana
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0xA960, 0xA97F),  # Hangul Jamo Extended-A
    (0xD7B0, 0xD7FF),  # Hangul Jamo Extended-B
]


@pytest.mark.parametrize(("first", "last"), UPSTREAM_RANGES + ADDED_RANGES)
def test_range_ends_are_cjk(first: int, last: int) -> None:
    assert is_cjk_codepoint(first)
    assert is_cjk_codepoint(last)


@pytest.mark.parametrize(
    "cp",
    [
        0x0041,  # A
        0x00E9,  # é
        0x10FF,
        0x1200,
        0x2FFF,
        0x3100,  # Bopomofo is not counted
        0x312F,
        0x3190,
        0x33FF,
        0x4DC0,  # Yijing hexagram symbols
        0xA95F,
        0xA980,
        0xD800,
        0xF8FF,
        0xFB00,
        0xFF64,  # half-width ideographic comma: just before the katakana
        0xFFA0,
        0x1F600,  # emoji
        0x2A6E0,
        0x2EE60,
        0x2F7FF,
        0x2FA20,
        0x2FFFF,
        0x323B0,
        0x10FFFF,
        -1,
    ],
)
def test_outside_the_ranges_is_not_cjk(cp: int) -> None:
    assert not is_cjk_codepoint(cp)


def test_ranges_are_sorted_and_disjoint() -> None:
    for (_, previous_last), (first, last) in itertools.pairwise(CJK_RANGES):
        assert previous_last < first <= last


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("", 0),
        ("hello world", 0),
        ("记忆断裂", 4),
        ("你好 world", 2),
        ("こんにちは", 5),
        ("カタカナ", 4),
        ("ｶﾀｶﾅ", 4),
        ("한국어", 3),
        ("\u1100\u1161", 2),  # conjoining Jamo
        ("\u3131\u314f", 2),  # compatibility Jamo
        ("\u3000", 1),  # ideographic space
        ("「引用」", 4),
        ("豈", 1),  # U+F900
        ("\U0002a700\U00030000\U0002f800", 3),
        ("Café ☕", 0),
    ],
)
def test_count_and_contains(text: str, count: int) -> None:
    assert count_cjk(text) == count
    assert contains_cjk(text) == (count > 0)


@given(st.text())
def test_count_agrees_with_codepoint_check(text: str) -> None:
    assert count_cjk(text) == sum(is_cjk_codepoint(ord(char)) for char in text)
    assert contains_cjk(text) == (count_cjk(text) > 0)


@given(st.integers(min_value=0, max_value=0x10FFFF))
def test_codepoint_check_agrees_with_a_linear_scan(cp: int) -> None:
    assert is_cjk_codepoint(cp) == any(first <= cp <= last for first, last in CJK_RANGES)
