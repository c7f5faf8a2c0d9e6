"""Which store a command works on, and how it is opened.

The group's global options (``--db PATH``, ``--url URL`` / ``$HERMES_STORE_URL``, or the
default ``$HERMES_HOME/state.db``) become one :class:`StoreTarget`, passed to every
command as click's context object.

Two ways to open it:

* :meth:`StoreTarget.session_db` — the full :class:`~hermes_store.facade.SessionDB`,
  which brings the schema up to date first (data commands);
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
from hermes_store.engine import create_engine, sqlite_path

if TYPE_CHECKING:
    from hermes_store.facade import SessionDB


@dataclass(frozen=True)
class StoreTarget:
    """The database the command line was pointed at, plus global output settings."""

    url: URL
    no_color: bool = False
    debug: bool = False

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
        if not create:
            self.require_existing()
        engine = create_engine(self.url, poolclass=sa.pool.NullPool)
        try:
            yield engine
        finally:
            engine.dispose()

    @contextmanager
    def session_db(self, *, create: bool = False) -> Iterator[SessionDB]:
        """A :class:`SessionDB` on the store (schema brought up to date), closed afterwards."""
        from hermes_store.facade import SessionDB

        if not create:
            self.require_existing()
        db = SessionDB(url=self.url)
        try:
            yield db
        finally:
            db.close()


pass_target = click.make_pass_decorator(StoreTarget)
"""Decorator giving a command the :class:`StoreTarget` of the invocation."""
