"""Copying a whole store into an empty one on another backend (SQLite ⇄ PostgreSQL).

The copy is exact — ids, timestamps, counters, titles, lineage, metadata — and resumable:

1. The target must hold no session and no message (:class:`CopyRefused` otherwise),
   unless ``resume`` continues an interrupted copy of the same, unchanged source.
2. It is brought to head and the copy is recorded in it (with the source's fingerprint);
   a PostgreSQL target also sets its secondary indexes and foreign keys aside
   (:mod:`hermes_store.admin.copy_target`).
3. Sessions, parents before children, in committed batches; on resume the sessions the
   target holds are skipped.
4. Messages in id order, in committed batches of ``batch_rows``; on resume from the
   largest id the target holds — every batch before it committed whole, in order, so the
   target holds exactly the source's messages up to that id.
5. Metadata rows (a handful, replaced by key).
6. The indexes and constraints set aside are restored, one transaction each; the
   message id sequence is moved past the largest id; statistics refreshed.
7. The target is verified against the source (:mod:`hermes_store.admin.copy_verify`),
   then the copy's record is dropped.

A copy killed at any point leaves either nothing (it had not recorded itself yet) or a
record ``resume`` continues from. The source must not be written to during the copy; a
source that changed since an interrupted copy began is refused on resume.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import orm
from sqlalchemy.engine import Engine

from hermes_store.admin.copy_target import (
    TargetWriter,
    columns_of,
    inspect_target,
    target_max_message_id,
    target_session_ids,
    writer_for,
)
from hermes_store.admin.copy_verify import Verification, verify_copy
from hermes_store.db.execution import fetch_tuples
from hermes_store.domain.progress import ProgressFn, ignore_progress
from hermes_store.errors import CopyRefused
from hermes_store.schema.migrate import ensure_schema, upgrade
from hermes_store.schema.models import Message, Session

BATCH_ROWS = 20_000
"""Rows per batch (one ``COPY`` or one ``executemany``, one transaction)."""


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


def _quoted(engine: Engine, names: Sequence[str]) -> str:
    quote = engine.dialect.identifier_preparer.quote
    return ", ".join(quote(name) for name in names)


def source_fingerprint(source: Engine) -> dict[str, Any]:
    """Counts and the id range of the source: what a resumed copy checks is unchanged."""
    with orm.Session(source) as db:
        ((sessions, messages, low, high, meta),) = fetch_tuples(
            db,
            "SELECT (SELECT COUNT(*) FROM sessions), COUNT(*), MIN(id), MAX(id), "
            "(SELECT COUNT(*) FROM state_meta) FROM messages",
        )
    return {"sessions": sessions, "messages": messages, "min_id": low, "max_id": high, "meta": meta}


def _check_target(target: Engine, fingerprint: dict[str, Any], resume: bool) -> bool:
    """Whether this copy resumes an interrupted one; raise :class:`CopyRefused` if the
    target cannot take it."""
    state = inspect_target(target)
    if state.fingerprint is not None:
        if not resume:
            raise CopyRefused(
                f"the target holds an interrupted copy ({state.sessions} sessions and {state.messages} "
                "messages so far): run the same copy with --resume to finish it"
            )
        if state.fingerprint != fingerprint:
            raise CopyRefused(
                f"the source has changed since the interrupted copy began (then {state.fingerprint}, "
                f"now {fingerprint}); empty the target and copy again"
            )
        return True
    if state.sessions or state.messages:
        raise CopyRefused(
            f"the target already holds {state.sessions} session(s) and {state.messages} message(s); "
            "copy only into an empty store"
            + (" (there is no interrupted copy in it to resume)" if resume else "")
        )
    return False


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


def _message_batches(source: Engine, after: int | None, size: int) -> Iterator[list[tuple[Any, ...]]]:
    """Source messages with ids above ``after`` (all when ``None``), in id order, by keyset pages."""
    columns = _quoted(source, columns_of(Message))
    with orm.Session(source) as db:
        while True:
            where = "" if after is None else "WHERE id > :after "
            rows = fetch_tuples(
                db,
                f"SELECT {columns} FROM messages {where}ORDER BY id LIMIT :size",
                {"after": after, "size": size} if after is not None else {"size": size},
                content_keys=("content",),
            )
            if not rows:
                return
            yield rows
            after = int(rows[-1][0])


def copy_store(
    source: Engine,
    target: Engine,
    progress: ProgressFn = ignore_progress,
    *,
    resume: bool = False,
    batch_rows: int = BATCH_ROWS,
) -> CopyReport:
    """Copy every session, message and metadata row of ``source`` into the empty ``target``.

    ``progress`` is called per committed batch for the steps ``sessions``, ``messages``,
    ``metadata``, ``indexes`` and ``verify``. ``resume=True`` continues an interrupted
    copy into ``target``. Raises :class:`CopyRefused` for a target that holds rows (or
    whose interrupted copy came from a source that has changed since),
    :class:`CopyMismatch` if the verification finds a difference, and
    ``TypeError``/``ValueError`` for content the target cannot hold (for example
    ``bytes`` content, which PostgreSQL's text column cannot store).
    """
    if batch_rows < 1:
        raise ValueError("batch_rows must be at least 1")
    ensure_schema(source)
    fingerprint = source_fingerprint(source)
    with writer_for(target) as writer:
        resuming = _check_target(target, fingerprint, resume)
        if not resuming:
            upgrade(target)
            writer.start(fingerprint)
        _copy_sessions(source, target, writer, progress, batch_rows, resuming)
        resumed_after = target_max_message_id(target) if resuming else None
        done = _copied_before(source, resumed_after)
        total = int(fingerprint["messages"])
        progress("messages", done, total)
        for rows in _message_batches(source, resumed_after, batch_rows):
            writer.write(Message, rows)
            done += len(rows)
            progress("messages", done, total)
        with orm.Session(source) as db:
            meta = fetch_tuples(db, "SELECT key, value FROM state_meta ORDER BY key")
        writer.upsert_meta(meta)
        progress("metadata", len(meta), len(meta))
        writer.restore(writer.pending(), progress)
        writer.complete()
        verification: Verification = verify_copy(source, target, progress)
        writer.forget()
    return CopyReport(
        verification.sessions,
        verification.messages,
        verification.meta,
        resumed_after=resumed_after,
        searched=verification.searched,
    )


def _copied_before(source: Engine, after: int | None) -> int:
    if after is None:
        return 0
    with orm.Session(source) as db:
        ((count,),) = fetch_tuples(db, "SELECT COUNT(*) FROM messages WHERE id <= :after", {"after": after})
    return int(count)


def _copy_sessions(
    source: Engine,
    target: Engine,
    writer: TargetWriter,
    progress: ProgressFn,
    batch_rows: int,
    resuming: bool,
) -> None:
    with orm.Session(source) as db:
        rows = fetch_tuples(db, f"SELECT {_quoted(source, columns_of(Session))} FROM sessions")
    ordered = parents_first(rows)
    present = target_session_ids(target) if resuming else set()
    missing = [row for row in ordered if row[0] not in present]
    done = len(ordered) - len(missing)
    progress("sessions", done, len(ordered))
    for batch in _batches(missing, batch_rows):
        writer.write(Session, batch)
        done += len(batch)
        progress("sessions", done, len(ordered))
