"""``INSERT … ON CONFLICT`` builders for the session's backend.

SQLite and PostgreSQL both support ``ON CONFLICT DO NOTHING/UPDATE`` but through their
own dialect constructs. The PostgreSQL dialect is imported only when a PostgreSQL store
is used, which keeps it off the start-up path of SQLite users.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import orm


def insert_for(db: orm.Session, table: Any) -> Any:
    """A dialect ``insert(table)`` supporting ``on_conflict_do_nothing``/``_do_update``."""
    if db.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    from sqlalchemy.dialects import sqlite

    return sqlite.insert(table)
