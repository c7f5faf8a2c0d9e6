"""Checking a copy: the target must hold exactly what the source holds.

``hermes-store verify SOURCE TARGET`` (and every ``copy``, before it drops its
bookkeeping) runs, in order, stopping at the first difference with
:class:`~hermes_store.errors.CopyMismatch` naming it:

1. counts of sessions and messages (cheap, and the most likely difference);
2. every row of ``sessions`` and ``messages``: one digest per session over every column
   of the session and of its messages, streamed on both sides; the first session whose
   digests differ is compared column by column to name the difference
   (:mod:`hermes_store.admin.copy_digest`);
3. every row of ``state_meta`` (plus the keys a fresh store holds by itself),
   ``compression_locks``, ``telegram_dm_topic_mode`` and ``telegram_dm_topic_bindings``
   (a table one side lacks reads as empty: SQLite stores create the topic tables when
   topic mode is first used);
4. every index, constraint and trigger of the target against a fresh store at the same
   revision (:mod:`hermes_store.admin.copy_schema`);
5. search: a few words taken from messages spread over the id range are searched on the
   target through the store's own search (FTS5 on SQLite, tsvector/GIN on PostgreSQL),
   which must find the message each word was taken from — proof that the rebuilt search
   indexes work.

Steps 1–3 read rows only (:func:`verify_rows`), so a copy into PostgreSQL runs them while
it builds the target's indexes; steps 4–5 (:func:`verify_schema`) follow the builds.
The source is read as it is, at its own revision (columns it lacks compare as the
defaults the copy wrote). Nothing is written to either store.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import func, orm, select
from sqlalchemy.engine import Engine

from hermes_store.admin.copy_digest import (
    first_row_difference,
    merge_by_key,
    normalized_rows,
    session_digests,
)
from hermes_store.admin.copy_schema import StoreSchema, differences, read_schema, reference_schema
from hermes_store.admin.copy_source import TableReader, readers_for
from hermes_store.admin.copy_target import inspect_target
from hermes_store.db.execution import fetch_tuples, run
from hermes_store.domain.codec import content_text_for_context, decode_content
from hermes_store.domain.progress import ProgressFn, ignore_progress
from hermes_store.errors import CopyMismatch, CopyRefused
from hermes_store.schema.migrate import read_schema_state
from hermes_store.schema.telegram_topic_ddl import TOPIC_TABLES
from hermes_store.search.engine import find_hits
from hermes_store.search.filters import SearchFilters
from hermes_store.search.plan import plan_search

SEARCH_SAMPLES = 5
VERIFY_STEPS = 5 + SEARCH_SAMPLES
"""Progress units of step ``verify``: the four checks, then one per sampled word."""
SEARCH_LIMIT = 1000
"""Hits asked for per sampled word; a word with this many is too common to compare."""
_WORD = re.compile(r"[a-z]{5,}")
SMALL_TABLES = (
    ("compression_locks", 1),
    ("telegram_dm_topic_mode", 1),
    ("telegram_dm_topic_bindings", 2),
)
"""The other copied tables and how many leading columns make their key."""

_SAMPLE = "SELECT id, content FROM messages WHERE id >= :at ORDER BY id LIMIT 20"
_ID_RANGE = "SELECT MIN(id), MAX(id) FROM messages"


@dataclass(frozen=True)
class Verification:
    """What was compared and found equal."""

    sessions: int
    messages: int
    meta: int
    searched: tuple[str, ...]
    """The words searched on the target."""
    schema_objects: int = 0
    """Indexes, constraints and triggers compared with a fresh store's."""


def _rows(engine: Engine, sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    with orm.Session(engine) as db:
        return fetch_tuples(db, sql, params, content_keys=("content",) if "content" in sql else ())


def _mismatch(difference: str) -> CopyMismatch:
    return CopyMismatch(f"the target does not match the source: {difference}")


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


def _count(engine: Engine, reader: TableReader) -> int:
    if not reader.exists:
        return 0
    with engine.connect() as connection:
        return int(run(connection, select(func.count()).select_from(reader.table)).scalar_one())


def _check_counts(
    source: Engine, target: Engine, ours: dict[str, TableReader], theirs: dict[str, TableReader]
) -> tuple[int, int]:
    expected = (_count(source, ours["sessions"]), _count(source, ours["messages"]))
    found = (_count(target, theirs["sessions"]), _count(target, theirs["messages"]))
    if expected != found:
        raise _mismatch(
            f"the source holds {expected[0]} session(s) and {expected[1]} message(s), the target "
            f"{found[0]} and {found[1]}"
        )
    return found


def _check_sessions(
    source: Engine, target: Engine, ours: dict[str, TableReader], theirs: dict[str, TableReader]
) -> None:
    """Session digests side by side; the first that differs is explained column by column."""
    for session_id, expected, found in merge_by_key(
        session_digests(source, ours), session_digests(target, theirs)
    ):
        if expected == found:
            continue
        difference = _explain_session(source, target, ours, theirs, session_id)
        raise _mismatch(difference or f"session {session_id!r} differs")


def _explain_session(
    source: Engine,
    target: Engine,
    ours: dict[str, TableReader],
    theirs: dict[str, TableReader],
    session_id: str,
) -> str | None:
    def sessions(engine: Engine, readers: dict[str, TableReader]) -> Iterator[tuple[Any, ...]]:
        reader = readers["sessions"]
        return normalized_rows(engine, reader, where=reader.table.c.id == session_id)

    def messages(engine: Engine, readers: dict[str, TableReader]) -> Iterator[tuple[Any, ...]]:
        reader = readers["messages"]
        return normalized_rows(engine, reader, where=reader.table.c.session_id == session_id)

    return first_row_difference(
        "sessions", ours["sessions"], sessions(source, ours), sessions(target, theirs)
    ) or first_row_difference("messages", ours["messages"], messages(source, ours), messages(target, theirs))


def _with_seeds(rows: Iterator[tuple[Any, ...]], seeds: dict[str, str | None]) -> Iterator[tuple[Any, ...]]:
    """``state_meta`` rows of the source, plus the keys a fresh target holds by itself."""
    keyed = ((row[0], row) for row in rows)
    for _key, own, seed in merge_by_key(keyed, ((key, (key, value)) for key, value in sorted(seeds.items()))):
        yield own if own is not None else seed  # type: ignore[misc]


def _check_tables(
    source: Engine,
    target: Engine,
    ours: dict[str, TableReader],
    theirs: dict[str, TableReader],
    seeds: dict[str, str | None],
) -> int:
    """The small tables row by row; returns how many metadata rows the target holds."""
    meta = list(normalized_rows(target, theirs["state_meta"]))  # a handful of keys
    difference = first_row_difference(
        "state_meta",
        ours["state_meta"],
        _with_seeds(normalized_rows(source, ours["state_meta"]), seeds),
        iter(meta),
    )
    for table, key_width in SMALL_TABLES:
        if difference:
            break
        difference = first_row_difference(
            table,
            ours[table],
            normalized_rows(source, ours[table]),
            normalized_rows(target, theirs[table]),
            key_width,
        )
    if difference:
        raise _mismatch(difference)
    return len(meta)


def _without_absent_topic_tables(found: StoreSchema, reference: StoreSchema) -> StoreSchema:
    """``found`` without the objects of the Telegram topic tables when a fresh store has
    none of them: a SQLite store creates those tables when topic mode is first used (and
    a copy does when its source has them), so their presence is no difference."""
    in_reference = {item.table for item in reference.objects.values()}
    kept = {
        key: item
        for key, item in found.objects.items()
        if item.table not in TOPIC_TABLES or item.table in in_reference
    }
    return replace(found, objects=kept)


def _check_schema(target: Engine, reference: StoreSchema) -> int:
    found = differences(reference, _without_absent_topic_tables(read_schema(target), reference))
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise CopyMismatch(f"the target's schema differs from a fresh store's: {found[0]}{more}")
    return len(reference.objects)


def _check_search(source: Engine, target: Engine, progress: ProgressFn, step: int, total: int) -> list[str]:
    """Each sampled word must find, on the target, the message it was taken from."""
    source_at_head = read_schema_state(source).at_head
    searched: list[str] = []
    for offset, (word, message_id) in enumerate(sample_words(source)):
        progress("verify", step + offset, total)
        on_target = _hit_ids(target, word)
        # Each backend tokenizes some text its own way (FTS5's unicode61 and PostgreSQL's
        # parser split URLs, paths and underscores differently), and a message out of the
        # live context is hidden from search: a word is judged only where the source
        # finds its message too (a source behind head cannot be searched as it is).
        on_source = _hit_ids(source, word) if source_at_head else {message_id}
        if len(on_source) >= SEARCH_LIMIT or len(on_target) >= SEARCH_LIMIT:
            continue  # too common: each backend may rank a different page of hits first
        if message_id in on_source and message_id not in on_target:
            raise CopyMismatch(
                f"the target does not match the source: searching {word!r} on the target does not find "
                f"message {message_id}, which holds it; the target's search indexes are incomplete"
            )
        searched.append(word)
    return searched


@dataclass(frozen=True)
class RowsVerified:
    """Steps 1–3 passed: every row of every copied table is in the target, unchanged."""

    sessions: int
    messages: int
    meta: int


def verify_rows(
    source: Engine, target: Engine, progress: ProgressFn = ignore_progress, *, unfinished: bool = False
) -> RowsVerified:
    """Steps 1–3: counts, every session and message row (digests), the small tables.

    Reads rows only, never the target's secondary indexes or constraints: a copy runs it
    while those are still being built. Raises :class:`CopyMismatch` at the first
    difference; :class:`CopyRefused` for a target holding an unfinished copy unless
    ``unfinished``.
    """
    if not unfinished and inspect_target(target).unfinished:
        raise CopyRefused(
            "the target holds an unfinished copy: finish it with hermes-store copy --resume "
            "(or start it again with --restart) before verifying"
        )
    ours, theirs = readers_for(source), readers_for(target)
    total = VERIFY_STEPS
    progress("verify", 0, total)
    sessions, messages = _check_counts(source, target, ours, theirs)
    progress("verify", 1, total)
    _check_sessions(source, target, ours, theirs)
    progress("verify", 2, total)
    meta = _check_tables(source, target, ours, theirs, reference_schema(target).seed_meta)
    progress("verify", 3, total)
    return RowsVerified(sessions, messages, meta)


def verify_schema(
    source: Engine, target: Engine, rows: RowsVerified, progress: ProgressFn = ignore_progress
) -> Verification:
    """Steps 4–5, once every index, constraint and trigger is in place: the target's
    schema against a fresh store's, then the sampled searches."""
    objects = _check_schema(target, reference_schema(target))
    progress("verify", 4, VERIFY_STEPS)
    searched = _check_search(source, target, progress, 5, VERIFY_STEPS)
    progress("verify", VERIFY_STEPS, VERIFY_STEPS)
    return Verification(rows.sessions, rows.messages, rows.meta, tuple(searched), objects)


def verify_copy(
    source: Engine, target: Engine, progress: ProgressFn = ignore_progress, *, unfinished: bool = False
) -> Verification:
    """Compare every row of ``target`` with ``source`` and the target's schema with a fresh
    store's; raise :class:`CopyMismatch` naming the first difference.

    A target holding an unfinished copy is refused (:class:`CopyRefused`) unless
    ``unfinished`` (the copy itself verifying before it drops its bookkeeping).
    """
    rows = verify_rows(source, target, progress, unfinished=unfinished)
    return verify_schema(source, target, rows, progress)
