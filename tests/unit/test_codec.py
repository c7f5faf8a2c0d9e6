"""Value encodings shared with upstream's state.db."""

from __future__ import annotations

import json
import logging
import sqlite3
from typing import Any

import pytest

from hermes_store.domain.codec import (
    CONTENT_JSON_PREFIX,
    content_text_for_context,
    count_tool_calls,
    decode_content,
    decode_json_or,
    decode_tool_calls,
    encode_content,
    encode_json,
    preview_text,
    text_parts,
)


class Unserialisable:
    def __str__(self) -> str:
        return "<unserialisable>"


IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}


def test_prefix_is_nul_then_json_colon() -> None:
    assert CONTENT_JSON_PREFIX == "\x00json:"


@pytest.mark.parametrize("value", [None, "", "hello", "记忆", 5, 0, 2.5, True, False, b"\x00\x01"])
def test_scalars_pass_through(value: object) -> None:
    assert encode_content(value) is value


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ([{"type": "text", "text": "hi"}], '\x00json:[{"type": "text", "text": "hi"}]'),
        ({"a": 1}, '\x00json:{"a": 1}'),
        ((1, 2), "\x00json:[1, 2]"),
        ([], "\x00json:[]"),
        ({}, "\x00json:{}"),
        (["记忆"], '\x00json:["记忆"]'),
    ],
)
def test_json_values_use_the_sentinel(value: object, encoded: str) -> None:
    assert encode_content(value) == encoded


def test_unserialisable_value_is_stored_as_str() -> None:
    assert encode_content(Unserialisable()) == "<unserialisable>"
    assert encode_content({1, 2}) == str({1, 2})


def test_circular_value_is_stored_as_str() -> None:
    loop: list[object] = []
    loop.append(loop)

    assert encode_content(loop) == "[[...]]"


@pytest.mark.parametrize(
    "value",
    [[{"type": "text", "text": "hi"}, IMAGE], {"a": [1, None, "é"]}, [], {}, ["记忆"], [1.5, True]],
)
def test_content_round_trips(value: object) -> None:
    assert decode_content(encode_content(value)) == value


def test_tuple_reads_back_as_list() -> None:
    assert decode_content(encode_content((1, "a"))) == [1, "a"]


@pytest.mark.parametrize("value", [None, "plain", "", 5, 2.5, b"\x00json:[1]", "json:[1]"])
def test_decode_leaves_other_values_alone(value: object) -> None:
    assert decode_content(value) is value


def test_decode_bad_json_logs_and_returns_raw(caplog: pytest.LogCaptureFixture) -> None:
    raw = "\x00json:[1, 2"

    with caplog.at_level(logging.WARNING, logger="hermes_store.domain.codec"):
        assert decode_content(raw) == raw

    assert caplog.records


def test_content_survives_sqlite_round_trip() -> None:
    """The sentinel's NUL must survive binding and reading back through sqlite3."""
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE TABLE m (content TEXT)")
    values: list[object] = [[{"type": "text", "text": "hi"}], "plain", 5, None, b"\x01"]
    for value in values:
        connection.execute("INSERT INTO m VALUES (?)", (encode_content(value),))

    stored = [decode_content(row[0]) for row in connection.execute("SELECT content FROM m")]

    assert stored == [[{"type": "text", "text": "hi"}], "plain", "5", None, b"\x01"]


@pytest.mark.parametrize("value", [None, [], {}, "", 0, False, 0.0])
def test_encode_json_falsy_is_null(value: object) -> None:
    assert encode_json(value) is None


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ([{"id": "c1", "function": {"name": "f", "arguments": "{}"}}],
         '[{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]'),
        ({"q": "记忆"}, '{"q": "记忆"}'),
        ({"a": 1, "b": [1, 2]}, '{"a": 1, "b": [1, 2]}'),
        ("text", '"text"'),
        (1, "1"),
    ],
)  # fmt: skip
def test_encode_json_is_utf8_with_default_separators(value: object, encoded: str) -> None:
    assert encode_json(value) == encoded


def test_encode_json_rejects_unserialisable() -> None:
    with pytest.raises(TypeError):
        encode_json([Unserialisable()])


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [
        ('[{"q": "\\u8bb0\\u5fc6"}]', [{"q": "记忆"}]),  # upstream's ASCII-escaped form
        ('[{"q": "记忆"}]', [{"q": "记忆"}]),  # ours
        ("{}", {}),
        ("[]", []),
        ("null", None),
        (b'{"a": 1}', {"a": 1}),
    ],
)
def test_decode_json_or_reads_both_encodings(raw: str | bytes, decoded: object) -> None:
    assert decode_json_or(raw, "fallback") == decoded


@pytest.mark.parametrize("raw", [None, "", b""])
def test_decode_json_or_falsy_is_none(raw: str | bytes | None) -> None:
    assert decode_json_or(raw, "fallback") is None


def test_decode_json_or_bad_json_logs_and_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="hermes_store.domain.codec"):
        assert decode_json_or("{not json", "fallback") == "fallback"

    assert caplog.records


def test_decode_tool_calls_rules() -> None:
    first = decode_tool_calls("[oops")
    first.append("mutated")

    assert decode_tool_calls(None) is None
    assert decode_tool_calls('[{"id": "c1"}]') == [{"id": "c1"}]
    assert decode_tool_calls("[oops") == []  # a fresh list each time


@pytest.mark.parametrize(
    ("tool_calls", "count"),
    [
        (None, 0),
        ([], 0),
        ([{"id": "a"}], 1),
        ([{"id": "a"}, {"id": "b"}, {"id": "c"}], 3),
        ({}, 1),
        ({"id": "a"}, 1),
        ("", 1),
        (0, 1),
        ((1, 2), 1),
    ],
)
def test_count_tool_calls(tool_calls: object, count: int) -> None:
    assert count_tool_calls(tool_calls) == count


@pytest.mark.parametrize(
    ("parts", "texts"),
    [
        ([{"type": "text", "text": "a"}, IMAGE, "b", {"type": "text", "text": ""}], ["a", "b"]),
        ([{"type": "text"}, {"type": "text", "text": 5}, {"text": "no type"}, 7], []),
        ([], []),
    ],
)
def test_text_parts(parts: list[Any], texts: list[str]) -> None:
    assert text_parts(parts) == texts


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain", "plain"),
        ("", ""),
        ([{"type": "text", "text": "look"}, IMAGE, {"type": "text", "text": "here"}], "look here"),
        (["a", "b"], "a b"),
        ([IMAGE], "[multimodal content]"),
        ([], "[multimodal content]"),
        ({"type": "text", "text": "dict"}, ""),
        (None, ""),
        (5, ""),
        (b"bytes", ""),
    ],
)
def test_content_text_for_context(value: object, text: str) -> None:
    assert content_text_for_context(value) == text


@pytest.mark.parametrize(
    ("stored", "preview"),
    [
        ("plain first message", "plain first message"),
        ("", ""),
        (encode_content([{"type": "text", "text": "what is"}, IMAGE, "this?"]), "what is this?"),
        (encode_content([IMAGE]), ""),
        (encode_content({"type": "text", "text": "dict"}), ""),
        ("\x00json:[broken", ""),
        (None, ""),
        (b"\x00", ""),
        (5, ""),
    ],
)
def test_preview_text(stored: object, preview: str) -> None:
    """A multimodal first message previews as its text, not "" as upstream's did."""
    assert preview_text(stored) == preview


def test_encoded_content_is_valid_json_after_prefix() -> None:
    encoded = encode_content([{"type": "text", "text": "记忆"}])

    assert isinstance(encoded, str)
    assert json.loads(encoded.removeprefix(CONTENT_JSON_PREFIX)) == [{"type": "text", "text": "记忆"}]


def test_a_string_that_looks_encoded_reads_back_as_the_same_string() -> None:
    stored = encode_content("\x00json:[1, 2]")
    assert stored == '\x00json:"\\u0000json:[1, 2]"'
    assert decode_content(stored) == "\x00json:[1, 2]"


@pytest.mark.parametrize("value", [float("nan"), 2**64, -(2**63) - 1])
def test_content_sqlite_cannot_hold_is_refused(value: object) -> None:
    with pytest.raises(ValueError):
        encode_content(value)


def test_content_nested_too_deeply_is_refused() -> None:
    nested: list[object] = []
    for _ in range(100_000):
        nested = [nested]
    with pytest.raises(ValueError, match="nested"):
        encode_content(nested)
