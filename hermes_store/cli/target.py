"""Which store a command works on, and how it is opened.

The group's global options (``--db PATH``, ``--url URL`` / ``$HERMES_STORE_URL``, or the
default ``$HERMES_HOME/state.db``) become one :class:`StoreTarget`, passed to every
command as click's context object.

Two ways to open it:

* :meth:`StoreTarget.session_db` — the full :class:`~hermes_store.api.session_db.SessionDB`,
  which brings the schema up to date first (commands that write);
* :meth:`StoreTarget.read_db` — a ``SessionDB`` over the store exactly as it is, for
  commands that only read: never created, migrated or switched to WAL;
* :meth:`StoreTarget.engine` — a bare engine that never migrates (``upgrade``,
  ``current``, ``info``, ``doctor``, ``backup`` … must see the database as it is).

Commands that read a store refuse a SQLite path with no file behind it instead of
creating an empty database there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click
import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine

from hermes_store.cli.errors import CliError
from hermes_store.db.engine import create_engine, sqlite_path

if TYPE_CHECKING:
    from hermes_store.api.session_db import SessionDB


@dataclass(frozen=True)
class StoreTarget:
    """The database the command line was pointed at, plus global output settings."""

    url: URL
    no_color: bool = False
    debug: bool = False
    default_location: bool = False
    """True when no --db/--url/$HERMES_STORE_URL chose the store: it is Hermes' own
    ``$HERMES_HOME/state.db``, whose folder a command that creates the store may create."""

    @property
    def path(self) -> Path | None:
        """The SQLite file, or ``None`` for in-memory and server databases."""
        return sqlite_path(self.url)

    @property
    def backend(self) -> str:
        """The SQLAlchemy backend name (``sqlite``, ``postgresql`` …)."""
        return self.url.get_backend_name()

    def describe(self) -> str:
        """A human name for the store: its path, or its URL without the password."""
        path = self.path
        if path is not None:
            return str(path)
        return self.url.render_as_string(hide_password=True)

    def exists(self) -> bool:
        """False only for a SQLite path with no file behind it (servers always "exist")."""
        path = self.path
        return path is None or path.exists()

    def require_existing(self) -> None:
        """Fail with a one-line error when a SQLite path has no database file."""
        if not self.exists():
            raise CliError(
                f"no database at {self.describe()} (create one with 'hermes-store upgrade' or 'import')"
            )

    def require_folder(self) -> None:
        """Fail with a one-line error when a new SQLite file's folder does not exist.

        A mistyped path must not leave folders behind; only ``SessionDB`` (as upstream's
        did) creates the folder of its database, and so does a creating command on the
        default location (a fresh machine has no ``~/.hermes`` yet, and nobody typed it).
        """
        path = self.path
        if path is not None and self.default_location and not path.parent.exists():
            path.parent.mkdir(mode=0o700, parents=True)
        if path is not None and not path.exists() and not path.parent.is_dir():
            raise CliError(
                f"no folder {path.parent} to create {path.name} in; check the path, "
                f"or create the folder first: mkdir -p '{path.parent}'"
            )

    def require_sqlite(self, what: str) -> Path:
        """The SQLite file, or a one-line error saying ``what`` needs one."""
        path = self.path
        if path is None:
            raise CliError(f"{what} works on a SQLite database file, not {self.describe()}")
        self.require_existing()
        return path

    @contextmanager
    def engine(self, *, create: bool = False) -> Iterator[Engine]:
        """A bare engine (no migration run), disposed of afterwards."""
        if create:
            self.require_folder()
        else:
            self.require_existing()
        # Creating (upgrade, import) prepares the file; everything else reads it as it is.
        engine = create_engine(self.url, prepare=create, poolclass=sa.pool.NullPool)
        try:
            yield engine
        finally:
            engine.dispose()

    @contextmanager
    def read_db(self) -> Iterator[SessionDB]:
        """A :class:`SessionDB` for reading: the store must exist and be at head (or newer).

        Reads never write: a store that needs an upgrade is reported, not upgraded.
        """
        from hermes_store.api.session_db import SessionDB
        from hermes_store.schema.migrate import read_schema_state

        with self.engine() as engine:
            state = read_schema_state(engine)
            if not (state.at_head or state.newer):
                raise CliError(_needs_upgrade(self, state.revision, state.legacy_version))
            db = SessionDB(engine=engine)
            try:
                yield db
            finally:
                db.close()

    @contextmanager
    def session_db(self, *, create: bool = False) -> Iterator[SessionDB]:
        """A :class:`SessionDB` on the store (schema brought up to date), closed afterwards."""
        from hermes_store.api.session_db import SessionDB

        if create:
            self.require_folder()
        else:
            self.require_existing()
        db = SessionDB(url=self.url)
        try:
            yield db
        finally:
            db.close()


def _needs_upgrade(target: StoreTarget, revision: str | None, legacy_version: int | None) -> str:
    if revision is None and legacy_version is None:
        found = "has no hermes_store schema (an empty or foreign database)"
    elif revision is None:
        found = f"is a legacy database (schema_version {legacy_version})"
    else:
        found = f"is at schema revision {revision}, older than this hermes_store"
    return f"{target.describe()} {found}; reading does not change it — run 'hermes-store upgrade' first"


pass_target = click.make_pass_decorator(StoreTarget)
"""Decorator giving a command the :class:`StoreTarget` of the invocation."""
