"""Copying a whole store into an empty one on another backend (SQLite ⇄ PostgreSQL).

The copy is exact — ids, timestamps, counters, titles, lineage, metadata, compression
leases, Telegram topic state — and resumable:

1. The source is read as it is (:mod:`hermes_store.admin.copy_source`): opened for
   reading, never migrated; columns a source behind head lacks take the defaults a
   migration would give them.
2. The target must hold no session and no message (:class:`CopyRefused` otherwise),
   unless ``resume`` continues an interrupted copy of the same, unchanged source, or
   ``restart`` empties an interrupted copy (or a target whose tables were dropped) and
   starts again. Every refusal names the one command that goes on from the target's
   state.
3. It is brought to head, the ``state_meta`` rows a fresh store holds by itself are
   written back where they are missing, and the copy is recorded in it (with the
   source's fingerprint and URL); a PostgreSQL target also sets its secondary indexes
   and foreign keys aside (:mod:`hermes_store.admin.copy_target`).
4. Sessions, parents before children, in committed batches; on resume the sessions the
   target holds are skipped.
5. Messages in id order, in committed batches of ``batch_rows``; on resume from the
   largest id the target holds — every batch before it committed whole, in order, so the
   target holds exactly the source's messages up to that id.
6. The small tables (compression leases, Telegram topic modes and bindings), each
   replaced whole in one transaction, and the metadata rows (replaced by key).
7. Every index, constraint and trigger a fresh store at head has and the target lacks is
   created (:mod:`hermes_store.admin.copy_schema`); the message id sequence is moved past
   the largest id; statistics refreshed.
8. The target is verified against the source (:mod:`hermes_store.admin.copy_verify`):
   every row — on a PostgreSQL target while step 7 builds the indexes, each build using
   one core and the row digests another (the builds read no row the copy still writes,
   and the digests read no index) — then, once step 7 is done, the schema and the
   searches; then the copy's record is dropped.

A copy killed at any point leaves either nothing (it had not recorded itself yet) or a
record ``resume`` continues from and ``restart`` clears; a target an operator then
emptied by hand (rows deleted, the record or tables dropped) is finished by the command
the refusal names. The source must not be written to during the copy; a source that
changed since an interrupted copy began is refused on resume (``restart`` copies it
again from the start).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from hermes_store.admin.copy_schema import StoreSchema, reference_schema
from hermes_store.admin.copy_source import TableReader, check_source, columns_of, stream_rows
from hermes_store.admin.copy_target import (
    TargetState,
    TargetWriter,
    inspect_target,
    lacks_what_a_load_sets_aside,
    target_max_message_id,
    target_session_ids,
    writer_for,
)
from hermes_store.admin.copy_verify import Verification, verify_copy, verify_rows, verify_schema
from hermes_store.db.backends import backend_for
from hermes_store.db.execution import run
from hermes_store.domain.progress import ProgressFn, ignore_progress
from hermes_store.errors import CopyMismatch, CopyRefused
from hermes_store.schema.migrate import upgrade
from hermes_store.schema.models import (
    CompressionLock,
    Message,
    Session,
    TelegramTopicBinding,
    TelegramTopicMode,
)

BATCH_ROWS = 20_000
"""Rows per batch (one ``COPY`` or one ``executemany``, one transaction)."""
SMALL_TABLES = (CompressionLock, TelegramTopicMode, TelegramTopicBinding)
"""Tables copied whole in one transaction each, after the sessions they may name."""


@dataclass(frozen=True)
class CopyReport:
    """What a copy moved, verified against the source."""

    sessions: int
    messages: int
    meta: int
    resumed_after: int | None = None
    """On resume, the largest message id the target already held (``None``: a fresh copy)."""
    searched: tuple[str, ...] = ()
    """The words searched on both stores by the verification."""
    restarted: bool = False
    """An interrupted copy was emptied and the copy started again."""


def source_fingerprint(source: Engine, readers: dict[str, TableReader]) -> dict[str, Any]:
    """Counts and the id range of the source: what a resumed copy checks is unchanged."""
    messages = readers["messages"].table
    with source.connect() as connection:

        def count(name: str) -> int:
            if not readers[name].exists:
                return 0
            return int(run(connection, select(func.count()).select_from(readers[name].table)).scalar_one())

        low, high = run(connection, select(func.min(messages.c.id), func.max(messages.c.id))).one()
        return {
            "sessions": count("sessions"),
            "messages": count("messages"),
            "min_id": low,
            "max_id": high,
            "meta": count("state_meta"),
        }


_RESTART_HINT = "run the same copy with --restart to empty the target and copy again"


def _check_target(target: Engine, fingerprint: dict[str, Any], resume: bool, restart: bool) -> str:
    """What this copy does with the target — ``"fresh"``, ``"resume"`` or ``"restart"`` —
    or :class:`CopyRefused` (one line naming the one command that works from the state
    the target is in)."""
    state = inspect_target(target)
    if state.missing_tables:  # dropped by hand: only a restart creates them again
        if restart:
            return "restart"
        lost = ", ".join(state.missing_tables)
        copy = "an interrupted copy" if state.unfinished else "a store"
        raise CopyRefused(f"the target holds {copy} whose table(s) {lost} are gone; {_RESTART_HINT}")
    if state.unfinished:
        return "restart" if restart else _resumed(state, fingerprint, resume)
    if state.sessions or state.messages:
        if lacks_what_a_load_sets_aside(target):
            if restart:
                return "restart"
            raise CopyRefused(
                f"the target holds {state.sessions} session(s) and {state.messages} message(s) without "
                "the indexes a copy builds at its end: an interrupted copy whose record was dropped; "
                + _RESTART_HINT
            )
        new = "file" if backend_for(target).is_file else "database"
        raise CopyRefused(
            f"the target already holds {state.sessions} session(s) and {state.messages} message(s); "
            f"copy only into an empty store: name a new {new} as the target"
            + (" (there is no interrupted copy in it to resume)" if resume else "")
            + (" (there is no interrupted copy in it to restart)" if restart else "")
        )
    return "restart" if restart else "fresh"


def _resumed(state: TargetState, fingerprint: dict[str, Any], resume: bool) -> str:
    """``"resume"`` for an interrupted copy of the same source with ``resume``; else the
    refusal naming the flag that goes on."""
    so_far = f"{state.sessions} sessions and {state.messages} messages so far"
    if not resume and state.fingerprint != fingerprint:
        raise CopyRefused(
            f"the target holds an interrupted copy ({so_far}) of a source that has changed since; "
            + _RESTART_HINT
        )
    if not resume:
        raise CopyRefused(
            f"the target holds an interrupted copy ({so_far}): run the same copy with --resume to finish it"
        )
    if state.fingerprint != fingerprint:
        raise CopyRefused(
            f"the source has changed since the interrupted copy began (then {state.fingerprint}, "
            f"now {fingerprint}); {_RESTART_HINT}"
        )
    return "resume"


def parents_first(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Session rows (``id`` first) ordered so every parent comes before its children.

    Within one depth the source order is kept. A parent that is not in the source, or a
    loop of parents, is refused: the target's foreign key could not hold it.
    """
    parent_at = columns_of(Session).index("parent_session_id")
    parent_of = {row[0]: row[parent_at] for row in rows}
    depth: dict[str, int] = {}
    for start in parent_of:
        chain: list[str] = []
        current: str | None = start
        while current is not None and current not in depth:
            if current in chain:
                loop = ", ".join(chain)
                raise CopyRefused(f"sessions {loop} name each other as parents; break the loop first")
            chain.append(current)
            parent = parent_of[current]
            if parent is not None and parent not in parent_of:
                raise CopyRefused(
                    f"session {current!r} names parent {parent!r}, which is not in the source; "
                    "clear its parent_session_id first"
                )
            current = parent
        base = -1 if current is None else depth[current]
        for offset, session_id in enumerate(reversed(chain), start=1):
            depth[session_id] = base + offset
    return sorted(rows, key=lambda row: depth[row[0]])


def _batches(rows: list[tuple[Any, ...]], size: int) -> Iterator[list[tuple[Any, ...]]]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def _message_batches(
    source: Engine, reader: TableReader, after: int | None, size: int
) -> Iterator[list[tuple[Any, ...]]]:
    """Source messages with ids above ``after`` (all when ``None``), in id order, by keyset pages."""
    table = reader.table
    while True:
        statement = select(*reader.columns()).order_by(table.c.id).limit(size)
        if after is not None:
            statement = statement.where(table.c.id > after)
        with source.connect() as connection:
            rows = [reader.complete(row) for row in run(connection, statement)]
        if not rows:
            return
        yield rows
        after = int(rows[-1][0])


def _read_ahead(batches: Iterator[list[tuple[Any, ...]]]) -> Iterator[list[tuple[Any, ...]]]:
    """``batches``, each read from the source on a thread of its own while the batch
    before it is written: the target's server works through a ``COPY`` while the next
    batch is read, instead of waiting for it."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hermes-copy-read") as reader:
        upcoming = reader.submit(next, batches, None)
        while (batch := upcoming.result()) is not None:
            upcoming = reader.submit(next, batches, None)
            yield batch


def copy_store(
    source: Engine,
    target: Engine,
    progress: ProgressFn = ignore_progress,
    *,
    resume: bool = False,
    restart: bool = False,
    batch_rows: int = BATCH_ROWS,
) -> CopyReport:
    """Copy every row of the store ``source`` into the empty ``target``.

    ``progress`` is called per committed batch for the steps ``sessions``, ``messages``,
    ``tables``, ``metadata``, ``indexes`` and ``verify``. ``resume=True`` continues an
    interrupted copy into ``target``; ``restart=True`` empties an interrupted copy (or a
    target whose tables were dropped) and copies again. The source is only read. Raises
    :class:`CopyRefused` for a source that cannot be read as it is, for a target that
    holds rows (or whose interrupted copy came from a source that has changed since),
    :class:`CopyMismatch` if the verification finds a difference, and
    ``TypeError``/``ValueError`` for content the target cannot hold (for example
    ``bytes`` content, which PostgreSQL's text column cannot store).
    """
    if batch_rows < 1:
        raise ValueError("batch_rows must be at least 1")
    if resume and restart:
        raise ValueError("give resume or restart, not both")
    readers = check_source(source)
    fingerprint = source_fingerprint(source, readers)
    with writer_for(target) as writer:
        mode = _check_target(target, fingerprint, resume, restart)
        if mode == "restart":
            writer.empty()
        upgrade(target)
        reference = reference_schema(target)
        writer.restore_seed_meta(reference.seed_meta)
        if mode != "resume":
            writer.start(fingerprint, source.url.render_as_string(hide_password=True), reference)
        resuming = mode == "resume"
        _copy_sessions(source, readers["sessions"], target, writer, progress, batch_rows, resuming)
        resumed_after = target_max_message_id(target) if resuming else None
        _copy_messages(source, readers["messages"], writer, progress, batch_rows, resumed_after, fingerprint)
        for model in SMALL_TABLES:
            reader = readers[model.__tablename__]
            if not reader.exists:  # a SQLite source that never used Telegram topic mode
                continue
            copied = writer.replace(model, stream_rows(source, reader))
            progress("tables", copied, copied)
        meta = list(stream_rows(source, readers["state_meta"]))
        writer.upsert_meta(meta)
        progress("metadata", len(meta), len(meta))
        verification = _built_and_verified(source, target, writer, reference, progress)
        writer.forget()
    return CopyReport(
        verification.sessions,
        verification.messages,
        verification.meta,
        resumed_after=resumed_after,
        searched=verification.searched,
        restarted=mode == "restart",
    )


def _built_and_verified(
    source: Engine, target: Engine, writer: TargetWriter, reference: StoreSchema, progress: ProgressFn
) -> Verification:
    """Steps 7 and 8: the schema finished and the copy verified — the rows beside the
    builds when the writer allows it. A difference keeps the bookkeeping, so it names
    ``--restart``."""
    try:
        if not writer.builds_beside_reads:
            writer.finish_schema(reference, progress)
            writer.complete()
            return verify_copy(source, target, progress, unfinished=True)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hermes-copy-verify") as checker:
            rows = checker.submit(verify_rows, source, target, progress, unfinished=True)
            try:
                writer.finish_schema(reference, progress)
                writer.complete()
            except BaseException:
                rows.cancel()
                raise
            verified = rows.result()
        return verify_schema(source, target, verified, progress)
    except CopyMismatch as exc:
        raise CopyMismatch(
            f"{exc}; was the source written to during the copy? run the same copy with --restart "
            "to copy it again"
        ) from exc


def _copy_messages(
    source: Engine,
    reader: TableReader,
    writer: TargetWriter,
    progress: ProgressFn,
    batch_rows: int,
    resumed_after: int | None,
    fingerprint: dict[str, Any],
) -> None:
    done = _copied_before(source, reader, resumed_after)
    total = int(fingerprint["messages"])
    progress("messages", done, total)
    for rows in _read_ahead(_message_batches(source, reader, resumed_after, batch_rows)):
        writer.write(Message, rows)
        done += len(rows)
        progress("messages", done, total)


def _copied_before(source: Engine, reader: TableReader, after: int | None) -> int:
    if after is None:
        return 0
    table = reader.table
    with source.connect() as connection:
        return int(run(connection, select(func.count()).where(table.c.id <= after)).scalar_one())


def _copy_sessions(
    source: Engine,
    reader: TableReader,
    target: Engine,
    writer: TargetWriter,
    progress: ProgressFn,
    batch_rows: int,
    resuming: bool,
) -> None:
    rows = list(stream_rows(source, reader))
    ordered = parents_first(rows)
    present = target_session_ids(target) if resuming else set()
    missing = [row for row in ordered if row[0] not in present]
    done = len(ordered) - len(missing)
    progress("sessions", done, len(ordered))
    for batch in _batches(missing, batch_rows):
        writer.write(Session, batch)
        done += len(batch)
        progress("sessions", done, len(ordered))
