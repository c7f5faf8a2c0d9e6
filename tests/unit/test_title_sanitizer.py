"""Title cleaning, lineage numbers and LIKE escaping, as upstream Hermes does them."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_store.domain.titles import MAX_TITLE_LENGTH, escape_like, sanitize_title, split_title_number


@pytest.mark.parametrize(
    ("title", "cleaned"),
    [
        # The upstream table.
        ("  hello\x00  world  ", "hello world"),
        ("hello\t\nworld", "hello world"),
        ("\x07\x08test\x1b", "test"),
        ("\ufeffhello", "hello"),
        ("\x00\x01\x02\u200b\ufeff", None),
        ("A" * 100, "A" * 100),
        # The rules behind it.
        (None, None),
        ("", None),
        ("   ", None),
        ("a\rb", "a b"),
        ("a\x0bb\x0cc", "abc"),
        ("a\x7fb", "ab"),
        ("a\u00a0\u3000\u0085b", "a b"),
        ("a\u2028b\u2029c", "abc"),
        ("zero\u200bwidth\u200f\u202a\u202e\u2060\u2066\u2069", "zerowidth"),
        ("obj\ufffcect\ufff9\ufffa\ufffb", "object"),
        ("c1 \x80\x9f kept", "c1 \x80\x9f kept"),
        ("Café ☕ 记忆 — done!", "Café ☕ 记忆 — done!"),
        ("\x00" * 50 + "A" * 100, "A" * 100),
    ],
)
def test_sanitize_title(title: str | None, cleaned: str | None) -> None:
    assert sanitize_title(title) == cleaned


@pytest.mark.parametrize(("title", "length"), [("A" * 101, 101), ("记" * 150, 150), ("a " * 60, 119)])
def test_too_long_title_is_rejected(title: str, length: int) -> None:
    with pytest.raises(ValueError) as excinfo:
        sanitize_title(title)

    assert str(excinfo.value) == f"Title too long ({length} chars, max 100)"


def test_max_length_is_100() -> None:
    assert MAX_TITLE_LENGTH == 100


def _sanitize_or_none(title: str) -> str | None:
    try:
        return sanitize_title(title)
    except ValueError:
        return None


@given(st.text(max_size=150))
def test_sanitize_title_is_idempotent(title: str) -> None:
    cleaned = _sanitize_or_none(title)

    assert sanitize_title(cleaned) == cleaned


@given(st.text(max_size=150))
def test_sanitized_title_has_no_edge_or_double_whitespace(title: str) -> None:
    cleaned = _sanitize_or_none(title)

    if cleaned is not None:
        assert cleaned == cleaned.strip()
        assert "  " not in cleaned
        assert len(cleaned) <= MAX_TITLE_LENGTH


@pytest.mark.parametrize(
    ("title", "parts"),
    [
        ("my project", ("my project", None)),
        ("my project #2", ("my project", 2)),
        ("my project #10", ("my project", 10)),
        ("a #1 #2", ("a #1", 2)),
        ("foo #draft", ("foo #draft", None)),
        ("foo#2", ("foo#2", None)),
        ("foo #2 ", ("foo #2 ", None)),
        ("foo #", ("foo #", None)),
        (" #3", ("", 3)),
        ("line\nbreak #4", ("line\nbreak", 4)),
        ("arabic #٣", ("arabic #٣", None)),
    ],
)
def test_split_title_number(title: str, parts: tuple[str, int | None]) -> None:
    assert split_title_number(title) == parts


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("plain", "plain"),
        ("100%", "100\\%"),
        ("sp_new", "sp\\_new"),
        ("back\\slash", "back\\\\slash"),
        ("\\%_", "\\\\\\%\\_"),
        ("", ""),
    ],
)
def test_escape_like(text: str, escaped: str) -> None:
    assert escape_like(text) == escaped


# NUL is kept out of the haystack because SQLite's LIKE stops reading at it.
@given(
    st.text(alphabet=st.sampled_from("ab%_\\ "), max_size=12),
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12),
)
def test_escaped_like_matches_only_the_literal(needle: str, haystack: str) -> None:
    connection = sqlite3.connect(":memory:")
    pattern = "%" + escape_like(needle) + "%"

    (found,) = connection.execute("SELECT ? LIKE ? ESCAPE '\\'", (haystack, pattern)).fetchone()

    # LIKE folds ASCII case only, and no non-ASCII character lower-cases to "a" or "b".
    assert bool(found) == (needle.lower() in haystack.lower())
