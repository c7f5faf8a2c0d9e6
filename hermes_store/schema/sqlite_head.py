"""A new SQLite file created at head in one step, from a snapshot of what the history creates.

Replaying the Alembic history on every new file imports Alembic, loads each revision
script and runs about 150 statements, for objects that end up the same every time: 40 ms
for a new file in a process that has made one before, 150–250 ms for its first, where
upstream Hermes takes 8 ms. Hermes' own tests open a new file in almost every test.

``sqlite_head.json`` (beside this module) is that end state: the ``CREATE`` statements of
every object the history leaves on an empty SQLite file, in the order it created them, and
the rows it writes (``alembic_version``, upstream's ``schema_version``). A new, empty file
runs them inside the same write transaction the history would have run in. The snapshot
is used only when it was taken at the head of the shipped scripts; anything else (a file
that is not empty, another copy of the scripts, a target other than head) goes through
Alembic as before. ``tests/migrations/test_sqlite_head.py`` retakes the snapshot from a
file migrated by the real ``alembic`` history and compares both files object by object and
row by row, shadow tables included, so the snapshot cannot drift from the history.

Retake it after adding a revision: ``python -m hermes_store.schema.sqlite_head``.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Connection

SNAPSHOT_PATH = Path(__file__).with_name("sqlite_head.json")


@dataclass(frozen=True)
class HeadSnapshot:
    """The statements that recreate a SQLite file at ``revision`` from nothing."""

    revision: str
    statements: tuple[str, ...]
    rows: tuple[tuple[str, tuple[Any, ...]], ...]
    """``INSERT`` statements with their values, run after the statements."""

    def as_json(self) -> str:
        """The snapshot as the shipped file holds it."""
        document = {
            "revision": self.revision,
            "statements": list(self.statements),
            "rows": [[sql, list(values)] for sql, values in self.rows],
        }
        return json.dumps(document, indent=1, ensure_ascii=False) + "\n"


def read_snapshot(path: Path = SNAPSHOT_PATH) -> HeadSnapshot | None:
    """The snapshot stored at ``path``, or ``None`` when there is none."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return HeadSnapshot(
        str(document["revision"]),
        tuple(document["statements"]),
        tuple((sql, tuple(values)) for sql, values in document["rows"]),
    )


def at_head(snapshot: HeadSnapshot) -> bool:
    """Whether ``snapshot`` was taken at the head of the shipped scripts."""
    from hermes_store.schema.revisions import history

    return snapshot.revision == history().head


@lru_cache(maxsize=1)
def shipped_snapshot() -> HeadSnapshot | None:
    """The shipped snapshot when it was taken at the shipped scripts' head, else ``None``."""
    snapshot = read_snapshot()
    return snapshot if snapshot is not None and at_head(snapshot) else None


def create_if_empty(connection: Connection, revision: str) -> bool:
    """Create the schema at head on ``connection``'s empty SQLite file from the shipped
    snapshot, inside the caller's transaction; whether it did.

    Does nothing (and returns ``False``) when ``revision`` is not head, when the snapshot
    is not of the shipped head, or when the file holds any object at all: those go
    through Alembic.
    """
    snapshot = shipped_snapshot()
    if snapshot is None or revision not in ("head", snapshot.revision):
        return False
    if connection.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar():
        return False
    for statement in snapshot.statements:
        connection.exec_driver_sql(statement)
    for sql, values in snapshot.rows:
        connection.exec_driver_sql(sql, values)
    return True


def take_snapshot(connection: Connection, revision: str) -> HeadSnapshot:
    """Read the schema and rows of ``connection``'s file (migrated to ``revision``) as a
    snapshot: every object SQLite does not make by itself (automatic indexes, the shadow
    tables of FTS5 tables, ``sqlite_sequence``), in creation order, and the rows of every
    ordinary table."""
    kinds = {
        str(row[1]): str(row[2]) for row in connection.exec_driver_sql("PRAGMA main.table_list").fetchall()
    }
    statements: list[str] = []
    tables: list[str] = []
    catalog = connection.exec_driver_sql(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid"
    )
    for kind, name, sql in catalog.fetchall():
        if name.startswith("sqlite_") or kinds.get(name) == "shadow":
            continue
        statements.append(str(sql))
        if kind == "table" and kinds.get(name) == "table":
            tables.append(str(name))
    rows: list[tuple[str, tuple[Any, ...]]] = []
    for table in tables:
        result = connection.exec_driver_sql(f'SELECT * FROM "{table}"')
        names = result.keys()
        columns = ", ".join(f'"{name}"' for name in names)
        for row in result.fetchall():
            values = tuple(row)
            if not all(value is None or isinstance(value, str | int | float) for value in values):
                raise ValueError(f"{table} holds a value the snapshot cannot store: {values!r}")
            marks = ", ".join("?" for _ in values)
            rows.append((f'INSERT INTO "{table}" ({columns}) VALUES ({marks})', values))
    return HeadSnapshot(revision, tuple(statements), tuple(rows))


def snapshot_of_history() -> HeadSnapshot:
    """Migrate a new temporary file with the real Alembic history and take its snapshot."""
    from alembic import command

    from hermes_store.db.engine import create_engine
    from hermes_store.schema.revisions import alembic_config, history

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "head.db"
        engine = create_engine(path)
        try:
            command.upgrade(alembic_config(connection=engine), "head")
            with engine.connect() as connection:
                return take_snapshot(connection, history().head)
        finally:
            engine.dispose()


def main() -> None:
    """Retake the shipped snapshot from the current history."""
    SNAPSHOT_PATH.write_text(snapshot_of_history().as_json(), encoding="utf-8")
    print(f"wrote {SNAPSHOT_PATH}")


if __name__ == "__main__":
    main()
