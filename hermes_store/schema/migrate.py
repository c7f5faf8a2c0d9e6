"""Bringing a database to the schema this release expects.

``ensure_schema`` runs whenever a store opens. On an up-to-date database it costs one
query and never imports Alembic (a CLI opens the store on every command). What it does
otherwise depends on where the store lives:

* a SQLite file is migrated on open, as upstream Hermes does (Hermes relies on it): the
  Alembic history — adopting legacy upstream files on the way — runs inside one write
  transaction (``BEGIN IMMEDIATE``), so concurrent first opens queue up instead of
  migrating twice, and a crash mid-way leaves the file as it was;
* a database server is migrated by a deploy step (``hermes-store upgrade``), never by the
  processes serving from it: opening creates the schema only in an empty database (in
  one transaction, so that replicas starting together see it empty or complete), uses
  a schema behind head as it is when this release can run on it
  (:data:`~hermes_store.schema.revisions.OLDEST_RUNNABLE_REVISION`, with a
  :class:`SchemaBehindWarning`) and refuses an older one
  (:class:`~hermes_store.errors.SchemaBehind`). ``auto_upgrade=True`` migrates on open
  anyway (development).
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from hermes_store.db.backends import backend_for
from hermes_store.db.backends.postgresql import MIGRATION_LOCK_KEY
from hermes_store.db.engine import create_engine, write_engine
from hermes_store.db.profiles import qualified, store_schema, table_names
from hermes_store.db.sqlite_errors import is_lock_error, raise_translated
from hermes_store.domain.progress import ProgressFn
from hermes_store.errors import CopyUnfinished, DatabaseNotFound, SchemaBehind, SchemaError
from hermes_store.schema.legacy import NewerSchemaWarning
from hermes_store.schema.revisions import OLDEST_RUNNABLE_REVISION, History, history
from hermes_store.schema.revisions import alembic_config as alembic_config
from hermes_store.schema.revisions import migrations_path as migrations_path
from hermes_store.schema.sqlite_head import create_if_empty

if TYPE_CHECKING:
    from alembic.config import Config


log = logging.getLogger(__name__)

T = TypeVar("T")

MIGRATION_LOCK_WAIT_S = 120.0
"""How long an opener waits for another process's migration before giving up."""

STALLED_MIGRATION_S = 5.0
"""How long a server schema too old to run on may stay at one revision, while another
process holds the migrators' lock, before opening stops waiting for it and refuses."""

LOCK_POLL_S = 0.25
"""Pause between two looks at the migrators' lock."""

COPY_STATE_TABLE = "hermes_copy_state"
"""The bookkeeping ``hermes-store copy`` keeps in its target until the copy is verified:
a database holding it is not opened as a store."""


class SchemaBehindWarning(UserWarning):
    """A server database behind head is used as it is; ``hermes-store upgrade`` brings it up."""


@dataclass(frozen=True)
class SchemaState:
    """What one cheap query says about a database's schema."""

    revision: str | None
    legacy_version: int | None
    scripts: History = field(default_factory=history, compare=False)
    """The revision history this state is judged against (default: the shipped one)."""
    unfinished_copy: bool = False
    """The database holds the bookkeeping of a ``hermes-store copy`` not yet finished."""

    @property
    def at_head(self) -> bool:
        """True when Alembic's revision is ours and the newest."""
        return self.revision == self.scripts.head

    @property
    def newer(self) -> bool:
        """True when a newer release (ours or upstream's) has written this schema."""
        revision_newer = self.revision is not None and self.revision not in self.scripts
        head_version = self.scripts.head_schema_version or 0
        legacy_newer = self.legacy_version is not None and self.legacy_version > head_version
        return revision_newer or legacy_newer

    @property
    def empty(self) -> bool:
        """True when no schema has been created yet (neither Alembic's nor upstream's)."""
        return self.revision is None and self.legacy_version is None

    @property
    def runnable(self) -> bool:
        """True when this release can work on the schema as it is (head, newer, or behind
        head but at least :data:`~hermes_store.schema.revisions.OLDEST_RUNNABLE_REVISION`)."""
        return self.newer or self.scripts.reaches(self.revision, OLDEST_RUNNABLE_REVISION)


def read_schema_state(engine: Engine, script_location: str | None = None) -> SchemaState:
    """Read the Alembic revision, upstream's ``schema_version`` and whether a copy into the
    database is unfinished, in one query.

    Missing tables read as ``None``. Opens its own short read transaction. The state is
    judged against the scripts in ``script_location`` (default: the shipped migrations).
    """
    state = _read_schema_state(engine)
    if script_location is None:
        return state
    return replace(state, scripts=history(script_location))


def _read_schema_state(engine: Engine) -> SchemaState:
    # A profile's tables are named in its schema: the search path goes on to public,
    # whose tables (another store's) must never answer for a profile's missing ones.
    query = (
        f"SELECT (SELECT version_num FROM {qualified(engine, 'alembic_version')} LIMIT 1), "
        f"(SELECT MAX(version) FROM {qualified(engine, 'schema_version')}), "
        + backend_for(engine).table_count_sql(qualified(engine, COPY_STATE_TABLE))
    )
    try:
        with engine.connect() as connection:
            row = connection.exec_driver_sql(query).one()
            return SchemaState(row[0], None if row[1] is None else int(row[1]), unfinished_copy=bool(row[2]))
    except sa.exc.ProgrammingError:
        pass  # PostgreSQL: undefined table
    except sa.exc.DatabaseError as exc:
        _raise_if_not_missing_table(exc)
    return _read_state_table_by_table(engine)


def _raise_if_not_missing_table(exc: sa.exc.DatabaseError) -> None:
    if "no such table" not in str(exc.orig):
        raise_translated(exc, "reading the schema version")


def _read_state_table_by_table(engine: Engine) -> SchemaState:
    try:
        return _inspect_state_tables(engine)
    except sa.exc.DBAPIError as exc:
        raise_translated(exc, "reading the schema version")


def _inspect_state_tables(engine: Engine) -> SchemaState:
    with engine.connect() as connection:
        tables = table_names(connection)
        revision = None
        legacy_version = None
        if "alembic_version" in tables:
            revision = connection.exec_driver_sql(
                f"SELECT version_num FROM {qualified(connection, 'alembic_version')}"
            ).scalar()
        if "schema_version" in tables:
            value = connection.exec_driver_sql(
                f"SELECT MAX(version) FROM {qualified(connection, 'schema_version')}"
            ).scalar()
            legacy_version = None if value is None else int(value)
        return SchemaState(revision, legacy_version, unfinished_copy=COPY_STATE_TABLE in tables)


def refuse_unfinished_copy(engine: Engine, state: SchemaState | None = None) -> None:
    """Raise :class:`~hermes_store.errors.CopyUnfinished` when the database is the target of
    a copy that has not finished (``state``: the schema state already read, if any).

    Such a target holds part of the source only, and its message id sequence is moved
    past the copied ids only at the copy's end: used as a store, it would list part of
    the sessions and fail its first append."""
    if state is None:
        state = _waiting_out_other_migrators(lambda: read_schema_state(engine), "reading the schema version")
    if not state.unfinished_copy:
        return
    with engine.connect() as connection:
        source = connection.exec_driver_sql(
            f"SELECT value FROM {COPY_STATE_TABLE} WHERE key = 'source'"
        ).scalar()
    target = engine.url.render_as_string(hide_password=True)
    raise CopyUnfinished(
        "this database is the target of a hermes-store copy that has not finished (it holds part "
        f"of the source only); finish it with 'hermes-store copy {source or 'SOURCE_URL'} {target} --resume'"
    )


def refuse_empty_profile(engine: Engine) -> None:
    """Raise :class:`~hermes_store.errors.DatabaseNotFound` when ``engine`` names a profile
    whose schema holds no store yet (read-only opens: nothing is created).

    Used as it is, such a profile would find its tables along the search path in
    ``public``, in another store."""
    schema = store_schema(engine)
    if schema is None:
        return
    state = _waiting_out_other_migrators(lambda: read_schema_state(engine), "reading the schema version")
    if state.empty:
        raise DatabaseNotFound(
            f"schema {schema} of this database holds no store yet (nothing was created); create it "
            f"with {upgrade_command(engine)} or open it once without read_only"
        )


def ensure_schema(
    engine: Engine, script_location: str | None = None, *, auto_upgrade: bool = False
) -> SchemaState:
    """Make sure this release can work on the database; return the schema state it is used at.

    Head is the newest script in ``script_location`` (default: the shipped migrations).
    A database newer than this release is used as it is, with a :class:`NewerSchemaWarning`.

    A SQLite file behind head is migrated to head (upstream's behaviour). On a database
    server only an empty database is migrated (its schema created at head); one that has a
    schema behind head is used as it is, with a :class:`SchemaBehindWarning`, when this
    release can run on it, and raises :class:`~hermes_store.errors.SchemaBehind` naming
    ``hermes-store upgrade`` when it cannot. ``auto_upgrade=True`` migrates a server
    database on open too (development). While another process creates or migrates the
    database, a migrating open waits for it, up to :data:`MIGRATION_LOCK_WAIT_S`.

    On a server, an empty database another process is creating is waited for (without
    importing Alembic) and then used; a schema too old to run on is waited for while
    another process's migration keeps moving it forward (it may be an older release
    building the database revision by revision), and refused once it has stood still for
    :data:`STALLED_MIGRATION_S` or no migration holds the lock.
    """

    # A brand-new file being switched to WAL, or a migration in rollback-journal mode, can
    # refuse even a reader for longer than the 1 s busy timeout.
    def read() -> SchemaState:
        return read_schema_state(engine, script_location)

    state = _waiting_out_other_migrators(read, "reading the schema version")
    refuse_unfinished_copy(engine, state)
    if not (state.at_head or state.newer or backend_for(engine).is_file):
        if state.empty:
            state = _after_running_migration(engine, state, read, patience=None)
        elif not (auto_upgrade or state.runnable):
            state = _after_running_migration(engine, state, read, patience=STALLED_MIGRATION_S)
    if state.at_head and backend_for(engine).is_file and _stamped_lower(state):
        _run_last_version_step_again(engine, state, script_location)
        return _waiting_out_other_migrators(read, "reading the schema version")
    if state.at_head or state.newer:
        if state.newer:
            _warn_newer(state)
        return state
    # A file has no deploy step: whoever opens it migrates it. A server is migrated by its
    # deploy, never by every replica opening it (a long upgrade would stall them all).
    if not (auto_upgrade or state.empty or backend_for(engine).is_file):
        return _use_behind_head(engine, state)
    upgrade(engine, script_location=script_location)
    return _waiting_out_other_migrators(read, "reading the schema version")


def _stamped_lower(state: SchemaState) -> bool:
    """Whether a file at our head holds an upstream ``schema_version`` below the one head
    writes: another program wrote it lower (upstream itself never does), and upstream would
    take that as a reason to run its version-gated data fixes on the file again."""
    head_version = state.scripts.head_schema_version
    version = state.legacy_version
    return version is not None and head_version is not None and version < head_version


def _run_last_version_step_again(engine: Engine, state: SchemaState, script_location: str | None) -> None:
    """Step a file stamped lower back to the revision before the one that set head's
    ``schema_version``, and upgrade: that revision adds whatever is missing, runs the data
    fixes the lower version calls for, and stamps the version again. Interrupted, the file
    is left at that earlier revision, which the next open upgrades."""
    scripts = state.scripts
    step = scripts.schema_versions.index(scripts.head_schema_version)
    before = scripts.revisions[step - 1]
    log.warning(
        "schema_version %s is below %s, which this store writes: running revision %s again",
        state.legacy_version,
        scripts.head_schema_version,
        scripts.revisions[step],
    )
    with engine.begin() as connection:
        connection.execute(sa.text("UPDATE alembic_version SET version_num = :before"), {"before": before})
    upgrade(engine, script_location=script_location)


def _after_running_migration(
    engine: Engine, state: SchemaState, read: Callable[[], SchemaState], *, patience: float | None
) -> SchemaState:
    """While another process holds the migrators' lock on ``engine``'s server, wait; then
    return the schema state as it is.

    With ``patience`` set, stop waiting (returning the latest state) once the state has not
    changed for that long: a long online upgrade of a real old schema is not waited for.
    Without it, wait for the lock itself (a one-transaction build shows no progress), up to
    :data:`MIGRATION_LOCK_WAIT_S`, then raise :class:`~hermes_store.errors.SchemaError`.
    Each look is its own short statement: no transaction stays open while waiting.
    """
    deadline = time.monotonic() + MIGRATION_LOCK_WAIT_S
    changed_at = time.monotonic()
    while _migration_lock_held(engine):
        now = time.monotonic()
        if patience is not None and now - changed_at > patience:
            return state
        if now > deadline:
            if patience is not None:
                return state
            raise migration_lock_wait_exceeded()
        time.sleep(LOCK_POLL_S)
        current = _waiting_out_other_migrators(read, "reading the schema version")
        if current.at_head or current.newer:
            return current
        if current != state:
            state, changed_at = current, time.monotonic()
    return _waiting_out_other_migrators(read, "reading the schema version")


def migration_lock_wait_exceeded() -> SchemaError:
    """The error of a migrator that waited :data:`MIGRATION_LOCK_WAIT_S` for the lock in vain."""
    return SchemaError(
        f"another migration of this database has held its lock for {MIGRATION_LOCK_WAIT_S:g} s; "
        "wait for it to finish (or end it) and run the upgrade again"
    )


# The migrators' advisory lock as pg_locks shows a 64-bit key: high half, low half, subid 1.
_MIGRATION_LOCK_HELD = sa.text(
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND classid::bigint = :high AND objid::bigint = :low AND objsubid = 1)"
).bindparams(high=MIGRATION_LOCK_KEY >> 32, low=MIGRATION_LOCK_KEY & 0xFFFFFFFF)


def _migration_lock_held(engine: Engine) -> bool:
    """True when some session holds the migrators' lock on the database (PostgreSQL)."""
    if backend_for(engine).name != "postgresql":
        return False
    with engine.connect() as connection:
        return bool(connection.execute(_MIGRATION_LOCK_HELD).scalar())


def _use_behind_head(engine: Engine, state: SchemaState) -> SchemaState:
    """Warn about (or refuse) a server schema behind head; never migrate it."""
    found = (
        f"revision {state.revision}"
        if state.revision is not None
        else f"schema_version {state.legacy_version}"
    )
    command = upgrade_command(engine)
    if not state.runnable:
        # A migration that stood still (a long backfill) may still finish the job.
        running = (
            "another process is migrating it but has not moved it lately; "
            if _migration_lock_held(engine)
            else ""
        )
        raise SchemaBehind(
            f"the database is at schema {found}, older than this hermes_store can run on "
            f"(at least {OLDEST_RUNNABLE_REVISION}, head {state.scripts.head}); {running}"
            f"opening never migrates a server database: run {command}"
        )
    message = (
        f"the database is at schema {found}, behind this hermes_store's head "
        f"{state.scripts.head}; using it as it is — run {command} to finish the deploy"
    )
    log.warning("%s", message)
    warnings.warn(message, SchemaBehindWarning, stacklevel=4)
    return state


def upgrade_command(engine: Engine) -> str:
    """The command line that upgrades ``engine``'s database (password hidden)."""
    shown = engine.url.render_as_string(hide_password=True)
    return f"'hermes-store --url {shown} upgrade'"


def _waiting_out_other_migrators(work: Callable[[], T], operation: str) -> T:
    """Run ``work``; while another process holds the database for a migration, retry it.

    Lock errors are retried with 20–150 ms jitter for up to :data:`MIGRATION_LOCK_WAIT_S`;
    anything else (and a lock still held after that) is raised, translated.
    """
    deadline = time.monotonic() + MIGRATION_LOCK_WAIT_S
    while True:
        try:
            return work()
        except (sa.exc.DBAPIError, sqlite3.Error) as exc:
            if not is_lock_error(exc) or time.monotonic() > deadline:
                raise_translated(exc, operation)
            time.sleep(random.uniform(0.02, 0.15))


def _warn_newer(state: SchemaState) -> None:
    warnings.warn(
        f"database schema (revision {state.revision}, schema_version {state.legacy_version}) "
        f"is newer than this hermes_store (revision {state.scripts.head}, "
        f"version {state.scripts.head_schema_version}); "
        "using it as it is",
        NewerSchemaWarning,
        stacklevel=3,
    )


def _as_engine(target: Engine | str | os.PathLike[str] | None, prepare: bool = True) -> tuple[Engine, bool]:
    if isinstance(target, Engine):
        return target, False
    return create_engine(target, prepare=prepare, poolclass=sa.pool.NullPool), True


def upgrade(
    target: Engine | str | os.PathLike[str] | None = None,
    revision: str = "head",
    *,
    script_location: str | None = None,
    progress: ProgressFn | None = None,
) -> None:
    """Upgrade ``target`` (an engine, URL, path, or the default database) to ``revision``.

    Legacy upstream databases are adopted first. On SQLite the whole upgrade runs in one
    write transaction, so it either completes or leaves the database as it was. On
    PostgreSQL it runs online, step by step (``docs/postgresql.md``, "Online
    migrations"): a run that stops part-way is completed by the next. An empty PostgreSQL
    database is the exception: nothing serves from it yet, so it is built in one
    transaction, and other processes see it empty or complete. ``progress`` hears about
    long steps (backfills, index builds).
    """
    _run_alembic(target, "upgrade", revision, script_location, progress)


def downgrade(
    target: Engine | str | os.PathLike[str] | None, revision: str, *, script_location: str | None = None
) -> None:
    """Downgrade ``target`` to ``revision``; in one write transaction on SQLite. Every
    session and every live message row is kept; below revision 0019 what
    :func:`downgrade_losses` names goes."""
    _run_alembic(target, "downgrade", revision, script_location)


UPSTREAM_17_REVISION = "0019"
"""The revision whose downgrade drops data a user may miss (:func:`downgrade_losses`)."""

_LOST_BELOW_0019 = (
    ("compression lease(s) dropped", "compression_locks", ""),
    ("Telegram topic chat(s) dropped", "telegram_dm_topic_mode", ""),
    ("Telegram topic binding(s) dropped", "telegram_dm_topic_bindings", ""),
    ("archived session(s) listed again", "sessions", " WHERE archived <> 0"),
    (
        "rewound or compacted-away message(s) set aside until the next upgrade",
        "messages",
        " WHERE active = 0",
    ),
)
"""What a downgrade below 0019 changes that a user may miss: a phrase, the table whose
rows (those the condition keeps) are counted, and the condition."""


def downgrade_losses(engine: Engine, revision: str) -> list[str]:
    """What downgrading ``engine``'s database to ``revision`` drops or changes beyond the
    schema, one phrase with its count each (``[]``: nothing, or a downgrade that stays at
    or above revision 0019). ``revision`` is an id, ``base`` or a relative ``-N``."""
    state = read_schema_state(engine)
    scripts = state.scripts
    if not scripts.reaches(state.revision, UPSTREAM_17_REVISION) or state.revision not in scripts:
        return []
    target = _downgrade_target(scripts, str(state.revision), revision)
    if target is not None and scripts.reaches(target, UPSTREAM_17_REVISION):
        return []
    with engine.connect() as connection:
        tables = table_names(connection)
        counts = [
            (phrase, int(connection.exec_driver_sql(f"SELECT count(*) FROM {table}{where}").scalar() or 0))
            for phrase, table, where in _LOST_BELOW_0019
            if table in tables
        ]
    return [f"{count} {phrase}" for phrase, count in counts if count]


def _downgrade_target(scripts: History, current: str, revision: str) -> str | None:
    """The revision a downgrade to ``revision`` ends at (``None``: base, or unknown)."""
    if revision.startswith("-") and revision[1:].isdigit():
        index = scripts.revisions.index(current) - int(revision[1:])
        return scripts.revisions[index] if index >= 0 else None
    return revision if revision in scripts else None


def _run_alembic(
    target: Engine | str | os.PathLike[str] | None,
    verb: str,
    revision: str,
    script_location: str | None,
    progress: ProgressFn | None = None,
) -> None:
    engine, owned = _as_engine(target)
    attributes: dict[str, Any] = {"progress": progress}

    def run() -> None:
        if backend_for(engine.dialect).name == "postgresql":
            # Online: env.py takes the migrators' session lock and runs each step in its
            # own transaction (a transaction held here would make it one again).
            config = alembic_config(script_location=script_location, connection=engine, **attributes)
            _alembic_command(verb)(config, revision)
            return
        # One transaction: if another process is migrating (a large backfill can outlast
        # the 1 s busy timeout), everything rolls back and the retry re-checks the state.
        with write_engine(engine).connect() as connection, connection.begin():
            # A new file takes the head snapshot (no Alembic import: it is deferred to here).
            if verb == "upgrade" and script_location is None and create_if_empty(connection, revision):
                return
            config = alembic_config(script_location=script_location, connection=connection, **attributes)
            _alembic_command(verb)(config, revision)

    try:
        _waiting_out_other_migrators(run, f"running the schema {verb}")
    finally:
        if owned:
            engine.dispose()


def _alembic_command(verb: str) -> Callable[[Config, str], None]:
    from alembic import command

    run = cast(Callable[["Config", str], None], getattr(command, verb))

    def one_at_a_time(config: Config, revision: str) -> None:
        with _ALEMBIC_IN_USE:
            run(config, revision)

    return one_at_a_time


_ALEMBIC_IN_USE = threading.Lock()
"""Alembic keeps the running migration in module globals (``alembic.context``), so two
threads of one process must not run it at once (two stores opening one new database)."""


def current_revision(target: Engine | str | os.PathLike[str] | None = None) -> str | None:
    """The Alembic revision the database is at (``None`` for an empty or legacy database).

    A read: nothing is created and the file is left as it is.
    """
    engine, owned = _as_engine(target, prepare=False)
    try:
        return read_schema_state(engine).revision
    finally:
        if owned:
            engine.dispose()
