"""Checking a finished copy: the target must match the source.

Three checks, each one query per side:

* counts of sessions, messages and metadata rows;
* per session, every counter and timestamp ``sessions`` holds (``message_count``, token
  and cost counters, ``started_at``/``ended_at``), and what its messages are: how many,
  the smallest, largest and sum of their ids, the first and last timestamp;
* search: a few words taken from messages spread over the id range are searched on
  both stores through the store's own search (FTS5 on SQLite, tsvector/GIN on
  PostgreSQL); the target must find the message each word was taken from — which also
  proves the rebuilt indexes work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import orm
from sqlalchemy.engine import Engine

from hermes_store.db.execution import fetch_tuples
from hermes_store.domain.codec import content_text_for_context, decode_content
from hermes_store.domain.progress import ProgressFn
from hermes_store.errors import CopyMismatch
from hermes_store.search.engine import find_hits
from hermes_store.search.filters import SearchFilters
from hermes_store.search.plan import plan_search

SEARCH_SAMPLES = 5
SEARCH_LIMIT = 1000
"""Hits asked for per sampled word; a word with this many is too common to compare."""
_WORD = re.compile(r"[a-z]{5,}")

_COUNTS = """
    SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM messages),
           (SELECT COUNT(*) FROM state_meta)
"""
_COUNTERS = """
    SELECT id, message_count, tool_call_count, api_call_count, input_tokens, output_tokens,
           cache_read_tokens, cache_write_tokens, reasoning_tokens, estimated_cost_usd,
           actual_cost_usd, started_at, ended_at, parent_session_id
    FROM sessions
"""
_MESSAGE_SHAPE = """
    SELECT session_id, COUNT(*), MIN(id), MAX(id), SUM(id), MIN(timestamp), MAX(timestamp)
    FROM messages GROUP BY session_id
"""
_SAMPLE = "SELECT id, content FROM messages WHERE id >= :at ORDER BY id LIMIT 20"
_ID_RANGE = "SELECT MIN(id), MAX(id) FROM messages"


@dataclass(frozen=True)
class Verification:
    """What was compared and found equal."""

    sessions: int
    messages: int
    meta: int
    searched: tuple[str, ...]
    """The words searched on both stores."""


def _rows(engine: Engine, sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    with orm.Session(engine) as db:
        return fetch_tuples(db, sql, params, content_keys=("content",) if "content" in sql else ())


def _keyed(rows: list[tuple[Any, ...]]) -> dict[Any, tuple[Any, ...]]:
    return {row[0]: tuple(row[1:]) for row in rows}


def _first_difference(source: dict[Any, Any], target: dict[Any, Any]) -> str:
    for key in sorted(set(source) | set(target), key=str):
        if source.get(key) != target.get(key):
            return f"session {key!r}: source {source.get(key)}, target {target.get(key)}"
    return ""


def sample_words(engine: Engine, count: int = SEARCH_SAMPLES) -> list[tuple[str, int]]:
    """Up to ``count`` (word, message id) pairs from messages spread evenly over the ids.

    Only plain words — five or more ASCII letters between spaces — so that every
    backend's tokenizer reads them the same way.
    """
    ((low, high),) = _rows(engine, _ID_RANGE)
    if low is None:
        return []
    words: list[tuple[str, int]] = []
    for step in range(count):
        at = int(low) + (int(high) - int(low)) * step // max(count - 1, 1)
        for message_id, content in _rows(engine, _SAMPLE, {"at": at}):
            text = content_text_for_context(decode_content(content)).lower()
            found = {word for word in text.split() if _WORD.fullmatch(word)} - {word for word, _ in words}
            if found:
                words.append((max(sorted(found), key=len), int(message_id)))  # long words are rare ones
                break
    return words


def _hit_ids(engine: Engine, word: str) -> set[int]:
    with orm.Session(engine) as db:
        hits = find_hits(db, plan_search(word), SearchFilters(), SEARCH_LIMIT, 0)
    return {int(hit["id"]) for hit in hits}


def verify_copy(source: Engine, target: Engine, progress: ProgressFn) -> Verification:
    """Compare the target with the source; raise :class:`CopyMismatch` at the first difference."""
    words = sample_words(source)
    total = 3 + len(words)
    progress("verify", 0, total)
    (expected,) = _rows(source, _COUNTS)
    (found,) = _rows(target, _COUNTS)
    if tuple(expected) != tuple(found):
        raise CopyMismatch(
            f"copy does not match: source has sessions/messages/metadata {tuple(expected)}, "
            f"target {tuple(found)}; was the source written to during the copy? "
            "copy again into an empty target"
        )
    progress("verify", 1, total)
    for step, sql, what in ((2, _COUNTERS, "counters"), (3, _MESSAGE_SHAPE, "messages")):
        difference = _first_difference(_keyed(_rows(source, sql)), _keyed(_rows(target, sql)))
        if difference:
            raise CopyMismatch(
                f"copy does not match ({what}): {difference}; was the source written to during the "
                "copy? copy again into an empty target"
            )
        progress("verify", step, total)
    searched: list[str] = []
    for step, (word, message_id) in enumerate(words, start=4):
        progress("verify", step, total)
        on_source, on_target = _hit_ids(source, word), _hit_ids(target, word)
        if len(on_source) >= SEARCH_LIMIT or len(on_target) >= SEARCH_LIMIT:
            continue  # too common: each backend may rank a different page of hits first
        # Each backend tokenizes some text its own way (FTS5's unicode61 and PostgreSQL's
        # parser split URLs, paths and underscores differently), so the two hit lists may
        # differ by a few rows; the message the word was taken from must be found on both.
        if message_id in on_source and message_id not in on_target:
            raise CopyMismatch(
                f"copy does not match: searching {word!r} on the target does not find message "
                f"{message_id}, which holds it (the source finds {len(on_source)} message(s), "
                f"the target {len(on_target)}); the target's search indexes are incomplete"
            )
        searched.append(word)
    progress("verify", total, total)
    return Verification(int(found[0]), int(found[1]), int(found[2]), tuple(searched))
