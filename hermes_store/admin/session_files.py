"""Sessions in and out of a store as records: streamed export, JSONL import.

Export reads one session at a time (sessions are paged by ``(started_at, id)``), so
memory stays bounded by the largest single session. Each record is what
:meth:`SessionDB.export_session` returns: every session column plus ``"messages"``
(every message column, ``content`` and ``tool_calls`` decoded). How records are written
out (JSONL, JSON, Markdown) is the command line's business (``cli/export_formats.py``);
:func:`output_stream` gives the file they go to, replaced whole or not at all.

Import reads such records back from JSONL and stores them *exactly*: session and
message ids, timestamps, counters and every other column are kept, and ``content`` /
``tool_calls`` are re-encoded the way the store encodes them, so that
export → import into an empty store → export gives identical output. Sessions are
written in batches (one retried write transaction each); a child whose parent has not
been imported yet is linked once the parent arrives.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from sqlalchemy import exc as sa_exc
from sqlalchemy import orm

from hermes_store.db.backends import backend_for
from hermes_store.db.server_errors import first_line
from hermes_store.domain.codec import CONTENT_JSON_PREFIX
from hermes_store.repository import bulk
from hermes_store.schema.models import Message, Session

if TYPE_CHECKING:
    from hermes_store.api.session_db import SessionDB

_PAGE = 500
SESSION_COLUMNS = tuple(column.name for column in Session.__table__.columns)
MESSAGE_COLUMNS = tuple(column.name for column in Message.__table__.columns)
_JSON_TEXT_COLUMNS = ("reasoning_details", "codex_reasoning_items", "codex_message_items")


class ImportFailed(ValueError):
    """A record in the import file cannot be stored (bad JSON, missing fields, conflicts)."""


# --- export ------------------------------------------------------------------------------


def count_sessions(db: SessionDB, source: str | None) -> int:
    """How many sessions an export of ``source`` (or everything) covers: archived ones too."""
    return db.session_count(source, include_archived=True)


def iter_session_ids(db: SessionDB, source: str | None, page: int = _PAGE) -> Iterator[str]:
    """Every session id (of ``source``), oldest first, fetched ``page`` at a time."""
    last: tuple[float, str] | None = None
    while True:
        with db.unit_of_work.read() as session:
            rows = bulk.session_ids_page(session, source, last, page)
        if not rows:
            return
        for _, session_id in rows:
            yield session_id
        last = rows[-1]


def export_records(db: SessionDB, session_ids: Iterable[str]) -> Iterator[dict[str, Any]]:
    """``export_session`` records for ``session_ids`` (sessions deleted meanwhile are skipped)."""
    for session_id in session_ids:
        record = db.export_session(session_id)
        if record is not None:
            yield record


@contextmanager
def output_stream(path: str | None, stdout: IO[str]) -> Iterator[IO[str]]:
    """``stdout`` for ``-``/``None``; otherwise a temporary file renamed onto ``path`` on success."""
    if not path or path == "-":
        yield stdout
        return
    destination = Path(path)
    fd, temporary = tempfile.mkstemp(prefix=f".{destination.name}.", dir=destination.parent or Path("."))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as stream:
            yield stream
        os.replace(temporary, destination)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


# --- import ------------------------------------------------------------------------------


@dataclass
class ImportResult:
    """What an import did."""

    sessions: int = 0
    messages: int = 0
    skipped: int = 0
    lines: int = 0
    unlinked_parents: dict[str, str] = field(default_factory=dict)
    """Sessions whose parent is in neither the file nor the store: child id → parent id."""


def stored_content(value: Any) -> Any:
    """A decoded ``content`` value as the column stores it (the inverse of decoding)."""
    if value is None or isinstance(value, str):
        return value
    return CONTENT_JSON_PREFIX + json.dumps(value, ensure_ascii=False)


def _stored_json(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def session_values(record: dict[str, Any], line: int) -> dict[str, Any]:
    """The ``sessions`` columns of an export record (unknown keys are ignored)."""
    for required in ("id", "source", "started_at"):
        if record.get(required) is None:
            raise ImportFailed(f"line {line}: the session record has no {required!r}")
    values = {name: record[name] for name in SESSION_COLUMNS if name in record}
    values["id"] = str(values["id"])
    values["model_config"] = _stored_json(values.get("model_config"))
    return values


def message_values(message: dict[str, Any], session_id: str, line: int) -> dict[str, Any]:
    """The ``messages`` columns of one exported message, encoded as the store keeps them."""
    if not isinstance(message, dict) or message.get("role") is None or message.get("timestamp") is None:
        raise ImportFailed(f"line {line}: a message of session {session_id} has no 'role' or 'timestamp'")
    values = {name: message.get(name) for name in MESSAGE_COLUMNS}
    values["session_id"] = session_id
    values["content"] = stored_content(message.get("content"))
    tool_calls = message.get("tool_calls")
    values["tool_calls"] = None if tool_calls is None else json.dumps(tool_calls, ensure_ascii=False)
    for name in _JSON_TEXT_COLUMNS:
        values[name] = _stored_json(values[name])
    return values


def read_records(
    stream: IO[bytes], on_bytes: Callable[[int], None] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` for each non-blank line of a JSONL stream."""
    for number, raw in enumerate(stream, start=1):
        if on_bytes is not None:
            on_bytes(len(raw))
        stripped = raw.strip()
        if not stripped:
            continue
        if number == 1 and stripped.startswith(b"["):
            raise ImportFailed(
                "this looks like a JSON array; import reads JSONL (export with --format jsonl)"
            )
        try:
            record = json.loads(stripped)
        except ValueError as exc:
            raise ImportFailed(f"line {number}: not valid JSON ({exc})") from exc
        if not isinstance(record, dict):
            raise ImportFailed(f"line {number}: expected a JSON object with a session")
        yield number, record


@dataclass
class _Batch:
    sessions: list[dict[str, Any]] = field(default_factory=list)
    messages: list[list[dict[str, Any]]] = field(default_factory=list)
    parents: dict[str, str] = field(default_factory=dict)
    lines: list[int] = field(default_factory=list)
    message_count: int = 0


class Importer:
    """Writes export records into a store, batch by batch."""

    def __init__(self, db: SessionDB, *, skip_existing: bool = False, batch_sessions: int = 200) -> None:
        self.db = db
        self.skip_existing = skip_existing
        self.batch_sessions = batch_sessions
        self.batch_messages = 20_000
        self.result = ImportResult()
        self.pending: dict[str, str] = {}

    def run(self, records: Iterable[tuple[int, dict[str, Any]]]) -> ImportResult:
        """Import every record; returns the totals."""
        batch = _Batch()
        for line, record in records:
            self.result.lines = line
            values = session_values(record, line)
            parent = values.pop("parent_session_id", None)
            values["parent_session_id"] = None
            messages = [message_values(m, values["id"], line) for m in record.get("messages") or []]
            batch.lines.append(line)
            batch.sessions.append(values)
            batch.messages.append(messages)
            batch.message_count += len(messages)
            if parent:
                batch.parents[values["id"]] = str(parent)
            if len(batch.sessions) >= self.batch_sessions or batch.message_count >= self.batch_messages:
                self._flush(batch)
                batch = _Batch()
        if batch.sessions:
            self._flush(batch)
        self._finish()
        self.result.unlinked_parents = dict(self.pending)
        return self.result

    def _flush(self, batch: _Batch) -> None:
        def work(session: orm.Session) -> tuple[int, int, int, dict[str, str]]:
            existing = bulk.existing_ids(session, [values["id"] for values in batch.sessions])
            if existing and not self.skip_existing:
                line, clash = next(
                    (n, v["id"])
                    for n, v in zip(batch.lines, batch.sessions, strict=True)
                    if v["id"] in existing
                )
                raise ImportFailed(
                    f"line {line}: session {clash} already exists in the store; "
                    "import into an empty store, or pass --skip-existing"
                )
            sessions_added = messages_added = skipped = 0
            for values, messages in zip(batch.sessions, batch.messages, strict=True):
                if values["id"] in existing:
                    skipped += 1
                    continue
                bulk.insert_session(session, values, messages)
                sessions_added += 1
                messages_added += len(messages)
            wanted = {**self.pending, **{k: v for k, v in batch.parents.items() if k not in existing}}
            return sessions_added, messages_added, skipped, bulk.link_parents(session, wanted)

        try:
            added, messages, skipped, pending = self.db.unit_of_work.write(work, "importing sessions")
        except (sqlite3.IntegrityError, sa_exc.IntegrityError) as exc:
            raise ImportFailed(
                f"cannot import lines {batch.lines[0]}–{batch.lines[-1]}: {first_line(exc)} "
                "(a message id or title already used in this store?)"
            ) from exc
        self.result.sessions += added
        self.result.messages += messages
        self.result.skipped += skipped
        self.pending = pending

    def _finish(self) -> None:
        backend = backend_for(self.db.engine)
        self.db.unit_of_work.write(backend.after_bulk_copy, "advancing the message id sequence")
