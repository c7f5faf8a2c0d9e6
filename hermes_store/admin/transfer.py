"""Copying a whole store from one backend to another (SQLite ⇄ PostgreSQL).

Rows are streamed in batches and written with upserts keyed on the primary key, so an
interrupted copy can simply be run again: rows already copied are overwritten with the
same values, and the rest are added. Parent links are set after every session exists,
because a child can have been started before its parent row was copied. At the end the
row counts of both stores are compared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import Table, func, orm, select, update
from sqlalchemy.engine import Engine

from hermes_store.db.backends import backend_for
from hermes_store.db.execution import run
from hermes_store.errors import StoreError
from hermes_store.schema.migrate import ensure_schema
from hermes_store.schema.models import Base, Message, Session, StateMeta
from hermes_store.uow.unit_of_work import UnitOfWork

Progress = Callable[[str, int], None]
"""Called with (table name, rows copied in the batch just written)."""

BATCH_ROWS = 2000


@dataclass(frozen=True)
class CopyReport:
    """What a copy moved, per table, verified against the source."""

    sessions: int
    messages: int
    meta: int


def _upsert(db: orm.Session, model: type[Base], rows: Sequence[dict[str, Any]]) -> None:
    table: Table = model.__table__  # type: ignore[assignment]
    statement = backend_for(db).insert(table)
    keys = [column.name for column in table.primary_key.columns]
    updates = {c.name: statement.excluded[c.name] for c in table.columns if c.name not in keys}
    run(db, statement.on_conflict_do_update(index_elements=keys, set_=updates), list(rows))


def _batches(engine: Engine, model: type[Base], order_by: Any) -> Iterator[list[dict[str, Any]]]:
    columns = list(model.__table__.columns)
    with orm.Session(engine) as db:
        result = run(db, select(*columns).order_by(order_by).execution_options(yield_per=BATCH_ROWS))
        for partition in result.partitions(BATCH_ROWS):
            yield [dict(row._mapping) for row in partition]


def copy_store(source: Engine, target: Engine, progress: Progress | None = None) -> CopyReport:
    """Copy every session, message and meta row of ``source`` into ``target``.

    Both stores are brought to the current schema first. Safe to rerun after an
    interruption. Raises :class:`StoreError` if the counts differ at the end, and
    ``TypeError``/``ValueError`` for content the target cannot hold (for example
    ``bytes`` content, which PostgreSQL's text column cannot store).
    """
    ensure_schema(source)
    ensure_schema(target)
    uow = UnitOfWork(target)
    report = progress or (lambda _table, _rows: None)

    links: list[tuple[str, str]] = []
    for rows in _batches(source, Session, Session.id):
        links += [(row["id"], row["parent_session_id"]) for row in rows if row["parent_session_id"]]
        detached = [{**row, "parent_session_id": None} for row in rows]
        uow.write(partial(_upsert, model=Session, rows=detached), "copying sessions")
        report("sessions", len(rows))
    for start in range(0, len(links), BATCH_ROWS):
        chunk = links[start : start + BATCH_ROWS]
        uow.write(partial(_relink, links=chunk), "linking sessions")
    for rows in _batches(source, Message, Message.id):
        uow.write(partial(_upsert, model=Message, rows=rows), "copying messages")
        report("messages", len(rows))
    for rows in _batches(source, StateMeta, StateMeta.key):
        uow.write(partial(_upsert, model=StateMeta, rows=rows), "copying metadata")
        report("state_meta", len(rows))
    uow.write(backend_for(target).after_bulk_copy, "resetting the message id sequence")
    return _verify(source, target)


def _relink(db: orm.Session, links: Sequence[tuple[str, str]]) -> None:
    for child, parent in links:
        run(db, update(Session).where(Session.id == child).values(parent_session_id=parent))


def _counts(engine: Engine) -> tuple[int, int, int]:
    with orm.Session(engine) as db:
        return (
            int(run(db, select(func.count()).select_from(Session)).scalar_one()),
            int(run(db, select(func.count()).select_from(Message)).scalar_one()),
            int(run(db, select(func.count()).select_from(StateMeta)).scalar_one()),
        )


def _verify(source: Engine, target: Engine) -> CopyReport:
    expected = _counts(source)
    found = _counts(target)
    if found != expected:
        raise StoreError(
            f"copy incomplete: source has sessions/messages/meta {expected}, target {found}; "
            "the target held other rows already, or writes happened during the copy — rerun it"
        )
    return CopyReport(*found)
