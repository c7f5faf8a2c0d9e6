"""Keeping Alembic's batch mode away from ``messages``, whose triggers feed the FTS5 indexes.

``render_as_batch=True`` (needed on SQLite for the ALTERs it lacks) makes autogenerate
wrap every change to a table in ``op.batch_alter_table(...)``. On SQLite batch mode may
rebuild the table — create a copy, move the rows, drop the original — and dropping
``messages`` silently drops the six triggers that keep ``messages_fts`` and
``messages_fts_trigram`` in step: search would go stale with no error anywhere.

Two guards, both installed by ``migrations/env.py``:

* :func:`unbatch_protected_tables` (autogenerate's ``process_revision_directives``)
  renders changes to ``messages`` as plain ``op.…`` calls: SQLite runs what it can do in
  place (ADD COLUMN keeps the triggers) and refuses loudly what it cannot.
* :func:`check_fts_triggers` (after each revision is applied) refuses a revision — a
  hand-written ``batch_alter_table("messages")`` among them — that leaves a database at
  or above revision 0011 without those triggers; the revision's transaction rolls back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from alembic.operations import ops
from sqlalchemy.engine import Connection

from hermes_store.errors import SchemaError
from hermes_store.schema.legacy import FTS_TRIGGERS
from hermes_store.schema.revisions import History

PROTECTED_TABLES = frozenset({"messages"})
"""Tables carrying triggers that a table rebuild would lose."""
FIRST_REVISION_WITH_TRIGGERS = "0011"
"""From this revision on the six FTS triggers are named as :data:`FTS_TRIGGERS` lists."""


def unbatch_protected_tables(_context: Any, _revision: Any, directives: Sequence[Any]) -> None:
    """Autogenerate hook: changes to a protected table become plain, unbatched ops."""
    for script in directives:
        for container in (*script.upgrade_ops_list, *script.downgrade_ops_list):
            container.ops = _unbatched(container.ops)


def _unbatched(operations: list[ops.MigrateOperation]) -> list[ops.MigrateOperation]:
    result: list[ops.MigrateOperation] = []
    for operation in operations:
        if isinstance(operation, ops.ModifyTableOps) and operation.table_name in PROTECTED_TABLES:
            result.extend(operation.ops)  # rendered at top level: op.add_column("messages", …)
        else:
            result.append(operation)
    return result


def check_fts_triggers(connection: Connection, revision: str, scripts: History) -> None:
    """Raise :class:`SchemaError` if ``revision`` (just applied) left ``messages`` without its triggers.

    Only SQLite has the triggers, and only from revision 0011 on (older revisions
    named theirs differently).
    """
    if connection.dialect.name != "sqlite" or FIRST_REVISION_WITH_TRIGGERS not in scripts:
        return
    if scripts.revisions.index(revision) < scripts.revisions.index(FIRST_REVISION_WITH_TRIGGERS):
        return
    present = {
        str(row[0])
        for row in connection.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'messages'"
        )
    }
    missing = [name for name in FTS_TRIGGERS if name not in present]
    if missing:
        raise SchemaError(
            f"revision {revision} left table messages without its full-text triggers "
            f"({', '.join(missing)}): a batch_alter_table('messages') that rebuilds the table "
            "drops them and search would silently go stale. Use plain op.add_column(...) on "
            "messages, or recreate the triggers and rebuild both FTS indexes in that revision"
        )
