"""hermes_store: a conversation store for AI agents.

SQLAlchemy 2.x models, an Alembic history (revisions 0001–0011) and a drop-in
``SessionDB`` for Hermes Agent's ``state.db``. Quick start::

    from hermes_store import SessionDB

    db = SessionDB()                      # $HERMES_HOME/state.db, else ~/.hermes/state.db
    db.create_session("s1", source="cli")
    db.append_message("s1", role="user", content="hello")
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from hermes_store.db import engine as _engine
from hermes_store.db.engine import write_engine
from hermes_store.domain.paths import default_db_path
from hermes_store.errors import (
    AuthenticationFailed,
    CorruptDatabase,
    DatabaseNotFound,
    DropInLacks,
    DropInLacksKeyword,
    DropInLacksMethod,
    InsufficientPrivilege,
    MissingDriver,
    NestedWrite,
    ReadOnlyStore,
    SchemaBehind,
    SchemaError,
    SearchUnavailable,
    ServerUnavailable,
    StorageFull,
    StoreClosed,
    StoreError,
    StoreTimeout,
    UnsafePath,
    UnsupportedHermes,
    UnsupportedURL,
    WriteConflict,
)
from hermes_store.schema.migrate import (
    SchemaBehindWarning,
    current_revision,
    downgrade,
    ensure_schema,
    upgrade,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Engine

    from hermes_store.api.session_db import SessionDB

__version__ = "0.1.0"

__all__ = [
    "AuthenticationFailed",
    "CorruptDatabase",
    "DatabaseNotFound",
    "DropInLacks",
    "DropInLacksKeyword",
    "DropInLacksMethod",
    "InsufficientPrivilege",
    "MissingDriver",
    "NestedWrite",
    "ReadOnlyStore",
    "SchemaBehind",
    "SchemaBehindWarning",
    "SchemaError",
    "SearchUnavailable",
    "ServerUnavailable",
    "SessionDB",
    "StorageFull",
    "StoreClosed",
    "StoreError",
    "StoreTimeout",
    "UnsafePath",
    "UnsupportedHermes",
    "UnsupportedURL",
    "WriteConflict",
    "__version__",
    "create_engine",
    "current_revision",
    "default_db_path",
    "downgrade",
    "ensure_schema",
    "upgrade",
    "write_engine",
]


def create_engine(
    target: str | os.PathLike[str] | URL | None = None, *, prepare: bool = False, **engine_kwargs: Any
) -> Engine:
    """An engine on an existing store, for analytics (ORM queries over ``hermes_store.schema.models``).

    Nothing is created and nothing changes: a SQLite path with no file behind it raises
    :class:`~hermes_store.errors.DatabaseNotFound` (a typo never leaves an empty file or
    folder behind), and the file's journal mode is left as it is. ``prepare=True`` creates
    the file and switches it to WAL, as ``SessionDB`` does; ``journal_mode="delete"``
    keeps the rollback journal (see :func:`hermes_store.db.engine.create_engine`);
    ``profile=NAME`` reads that Hermes profile's store in a PostgreSQL database. Other
    keyword arguments go to :func:`sqlalchemy.create_engine`.
    """
    return _engine.create_engine(target, prepare=prepare, **engine_kwargs)


def __getattr__(name: str) -> Any:
    # SessionDB pulls in the repositories and search; load it on first use only.
    if name == "SessionDB":
        from hermes_store.api.session_db import SessionDB

        return SessionDB
    raise AttributeError(f"module 'hermes_store' has no attribute {name!r}")
