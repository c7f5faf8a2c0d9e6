"""Value encodings shared with upstream Hermes' ``state.db``.

Both programs may read and write the same database file, so every value that is not a
plain column type is encoded exactly as the other side expects:

* message ``content`` that is a list, dict or other JSON value is stored as the sentinel
  :data:`CONTENT_JSON_PREFIX` followed by its JSON text;
* the JSON columns (``tool_calls``, ``reasoning_details``, the ``codex_*`` items,
  ``sessions.model_config``) hold plain JSON text, and a falsy value is stored as NULL.

Everything here is pure: no database access, no I/O apart from logging.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

__all__ = [
    "CONTENT_JSON_PREFIX",
    "content_text_for_context",
    "count_tool_calls",
    "decode_content",
    "decode_json_or",
    "decode_tool_calls",
    "encode_content",
    "encode_json",
    "explicit_timestamp",
    "platform_message_text",
    "preview_text",
    "text_parts",
]

logger = logging.getLogger(__name__)

CONTENT_JSON_PREFIX = "\x00json:"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
"""Marks message content that was JSON-encoded because it was not a plain scalar."""

_UTF8_JSON = json.JSONEncoder(ensure_ascii=False)
"""``json.dumps(value, ensure_ascii=False)``, made once: ``json.dumps`` with any argument
besides the defaults builds a new encoder per call, half the cost of encoding a tool call."""

MULTIMODAL_PLACEHOLDER = "[multimodal content]"
"""Search-context text for list content that has no text parts at all."""


def encode_content(value: object) -> object:
    """Encode a message's ``content`` for the ``messages.content`` column.

    ``None``, ``str``, ``int``, ``float`` and ``bytes`` are returned unchanged; the driver
    binds them natively (numbers are then stored as text by the column's TEXT affinity,
    and ``bool`` counts as an ``int``). Any other JSON-serialisable value becomes
    ``CONTENT_JSON_PREFIX + json.dumps(value, ensure_ascii=False)``, so a tuple reads back
    as a list. A value that JSON cannot encode is stored as ``str(value)``.

    A string that itself starts with the sentinel is stored JSON-encoded behind it, so it
    reads back as the same string rather than as the value it looks like. ``ValueError``
    is raised, before anything is written, for what SQLite cannot hold faithfully: NaN
    (it would become NULL), integers beyond 64 bits, and structures nested too deeply.
    """
    if isinstance(value, str):
        if value.startswith(CONTENT_JSON_PREFIX):
            return CONTENT_JSON_PREFIX + _UTF8_JSON.encode(value)
        return value
    if isinstance(value, float) and math.isnan(value):
        raise ValueError("message content cannot be NaN: SQLite would store it as NULL")
    if isinstance(value, int) and not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError("integer message content must fit in 64 bits")
    if value is None or isinstance(value, int | float | bytes):
        return value
    try:
        return CONTENT_JSON_PREFIX + _UTF8_JSON.encode(value)
    except RecursionError as exc:
        raise ValueError("message content is nested too deeply to store as JSON") from exc
    except (TypeError, ValueError):
        # Upstream never refuses a message because of its content; a lossy string is
        # better than dropping the turn.
        return str(value)


def decode_content(value: object) -> object:
    """Decode a ``messages.content`` value read from the database.

    A string that starts with :data:`CONTENT_JSON_PREFIX` is JSON-decoded; if that fails a
    warning is logged and the raw string is returned. Every other value is returned as is.
    """
    if isinstance(value, str) and value.startswith(CONTENT_JSON_PREFIX):
        try:
            return json.loads(value[len(CONTENT_JSON_PREFIX) :])
        except ValueError:
            logger.warning("could not decode JSON message content; returning it raw")
            return value
    return value


def encode_json(value: object) -> str | None:
    """Encode a value for one of the JSON text columns.

    Falsy values (``None``, ``[]``, ``{}``, ``""``, ``0``, ``False``) become ``None`` so they
    are stored as NULL, as upstream does. Anything else is ``json.dumps`` with the default
    separators but ``ensure_ascii=False``: non-ASCII text stays readable UTF-8, which
    keeps CJK inside tool-call arguments searchable.

    :raises TypeError: if ``value`` is truthy but not JSON-serialisable.
    :raises ValueError: if ``value`` is nested too deeply to encode.
    """
    if not value:
        return None
    try:
        return _UTF8_JSON.encode(value)
    except RecursionError as exc:
        raise ValueError("value is nested too deeply to store as JSON") from exc


def decode_json_or(raw: str | bytes | bytearray | None, fallback: Any) -> Any:
    """Decode a JSON text column, with upstream's read rules.

    Returns ``None`` when ``raw`` is falsy (NULL or empty), the decoded value when it is
    valid JSON (ASCII-escaped text written by upstream and UTF-8 text written by us both
    decode), and ``fallback`` with a logged warning when it is not.
    """
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        logger.warning("could not decode a JSON column value; using %r instead", fallback)
        return fallback


def decode_tool_calls(raw: str | bytes | bytearray | None) -> Any:
    """Decode ``messages.tool_calls``: ``None`` when empty, ``[]`` when not valid JSON."""
    return decode_json_or(raw, [])


def count_tool_calls(tool_calls: object) -> int:
    """How much a message's ``tool_calls`` adds to ``sessions.tool_call_count``.

    The length of a list; 0 for ``None``; 1 for any other value, even ``{}`` or ``""``,
    because upstream counts any non-list value as a single call.
    """
    if tool_calls is None:
        return 0
    if isinstance(tool_calls, list):
        return len(tool_calls)
    return 1


def explicit_timestamp(value: object) -> float | None:
    """A message time the caller supplied, as epoch seconds (``None``: use the clock).

    An object with a ``timestamp()`` method (a ``datetime``) gives that method's value;
    anything else goes through ``float()``. A value neither way can convert is ignored
    (logged at DEBUG) rather than refusing the message, as upstream Hermes does; so is
    NaN or an infinity, which the NOT NULL ``timestamp`` column could not hold as such.
    """
    try:
        seconds = float(value.timestamp()) if hasattr(value, "timestamp") else float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        seconds = math.nan
    if math.isfinite(seconds):
        return seconds
    logger.debug("ignoring a message timestamp that is not a time: %r", value)
    return None


def platform_message_text(name: str, value: object) -> str | None:
    """A chat platform's message id as stored: ``None`` or text.

    A number becomes its decimal text, which is what SQLite's TEXT column makes of a
    number bound by upstream Hermes (and what a server's text column needs); any other
    type raises ``TypeError``.
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"{name} must be a str, a number or None, not {type(value).__name__}")


def text_parts(parts: list[Any]) -> list[str]:
    """Return the non-empty text pieces of multimodal content, in order.

    A piece is either a plain string or a ``{"type": "text", "text": ...}`` dict; images
    and other part types are skipped.
    """
    found: list[str] = []
    for part in parts:
        if isinstance(part, str):
            text = part
        elif isinstance(part, dict) and part.get("type") == "text":
            candidate = part.get("text")
            text = candidate if isinstance(candidate, str) else ""
        else:
            continue
        if text:
            found.append(text)
    return found


def content_text_for_context(value: object) -> str:
    """Text of already decoded content, for a search hit's ``context`` entries.

    A string is returned as is; a list gives its text parts joined by spaces, or
    ``"[multimodal content]"`` when it has none; anything else gives ``""``. Cutting the
    text to 200 characters is left to the caller.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return " ".join(text_parts(value)) or MULTIMODAL_PLACEHOLDER
    return ""


def preview_text(value: object) -> str:
    """Text of a stored first user message, for session-list previews.

    Takes the raw column value. Plain string content is returned as is. Sentinel-encoded
    list content gives its text parts joined by spaces, where upstream gives ``""``.
    Anything else (NULL, bytes, an encoded dict, undecodable JSON) gives
    ``""``.
    """
    if not isinstance(value, str):
        return ""
    if not value.startswith(CONTENT_JSON_PREFIX):
        return value
    decoded = decode_content(value)
    if isinstance(decoded, list):
        return " ".join(text_parts(decoded))
    return ""
