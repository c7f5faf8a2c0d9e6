"""Alembic environment of hermes_store.

What this adds to Alembic's stock ``env.py``, and why:

* The URL comes from ``-x url=…``, then ``$HERMES_STORE_URL``, then the default
  ``$HERMES_HOME/state.db`` (never from ``alembic.ini``, which holds no credentials).
* The engine is built by :func:`hermes_store.db.engine.create_engine`, whose transactions
  really begin (pysqlite recipe), so each revision's DDL commits or rolls back whole.
* ``include_name`` keeps autogenerate and ``alembic check`` to our model tables: FTS5
  virtual tables and their shadow tables must never be proposed for dropping.
* Upstream's legacy ``schema_version`` row is kept in step after every step, up and
  down, online and in ``--sql`` output (0001–0011 ⇒ 1–11; later revisions keep 11
  unless they declare otherwise).
* A legacy database (``schema_version`` without ``alembic_version``) is adopted: stamped
  at the revision its objects really satisfy, then upgraded. A database from a newer
  release is left untouched with a warning.
* ``alembic revision`` numbers a new script after head (``0012``…) unless ``--rev-id`` is given.
* Batch mode never touches ``messages``: autogenerate renders its changes unbatched and
  a revision that drops its FTS triggers is rolled back (``hermes_store.schema.migration_guard``).
* Programmatic callers may pass an ``Engine`` or a ``Connection`` in
  ``config.attributes["connection"]`` (pytest-alembic passes an Engine), and a
  :data:`~hermes_store.domain.progress.ProgressFn` in ``config.attributes["progress"]``.
* On PostgreSQL the upgrade runs online (``docs/postgresql.md``, "Online migrations"):
  one transaction per revision, and inside a revision each step its own transaction
  (``hermes_store.schema.migration_ops``), under the short lock timeout and the
  session settings of :func:`~hermes_store.schema.migration_ops.session_settings`, also
  written at the top of ``--sql`` output. A session advisory lock keeps two migrators
  apart (a waiter holds no transaction open); a migrator killed mid-statement loses its
  server statement within ``client_connection_check_interval`` (PostgreSQL 14+). A
  database found empty once the lock is held is built in ONE transaction instead
  (``config.attributes["fresh_database"]``), so other processes see it empty or at
  head and a killed build leaves it empty. SQLite keeps one write transaction per
  revision (``BEGIN IMMEDIATE``, transactional DDL).
"""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from logging.config import fileConfig
from typing import Any

import sqlalchemy as sa
from alembic import context
from sqlalchemy.engine import Connection, Engine

from hermes_store.db.backends.postgresql import MIGRATION_LOCK_KEY
from hermes_store.db.engine import create_engine, resolve_url, write_engine
from hermes_store.db.profiles import schema_of_url, store_schema, table_names
from hermes_store.db.transaction_pooler import apply_for_transaction, is_pooled
from hermes_store.errors import SchemaError
from hermes_store.schema import legacy, migration_guard, migration_ops
from hermes_store.schema.migrate import LOCK_POLL_S, MIGRATION_LOCK_WAIT_S, migration_lock_wait_exceeded
from hermes_store.schema.models import Base
from hermes_store.schema.revisions import History, history
from hermes_store.schema.telegram_topic_ddl import TOPIC_TABLES as SQLITE_ON_DEMAND_TABLES

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

log = logging.getLogger("hermes_store.migrations")
target_metadata = Base.metadata


def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    """Limit autogenerate to the tables our models declare (FTS5 tables stay out)."""
    if type_ == "table":
        return name in target_metadata.tables
    return True


# Expression indexes Alembic cannot compare; their DDL is frozen in the revisions and
# checked by tests. The others are PostgreSQL's search indexes (revisions 0011, 0012, 0015,
# 0017, and 0018's keyed by id bucket too).
EXPRESSION_INDEXES = frozenset(
    {
        "idx_sessions_started",
        "idx_messages_fts",
        "idx_messages_trgm",
        "idx_messages_search_vector",
        "idx_messages_cjk_grams",
        "idx_messages_session_id",
        "idx_messages_stored_cjk_grams",
        "idx_messages_word_pairs",
        "idx_messages_search_vector_bucket",
        "idx_messages_cjk_grams_bucket",
        "idx_messages_word_pairs_bucket",
        # Revision 0019: upstream's gateway indexes, newest session first.
        "idx_sessions_session_key",
        "idx_sessions_gateway_peer",
    }
)
# Columns only one backend has (on PostgreSQL: revision 0012's stored tsvector, 0015's
# stored CJK grams); the shared models do not declare them.
BACKEND_ONLY_COLUMNS = frozenset({("messages", "search_vector"), ("messages", "cjk_grams")})


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Leave out what Alembic cannot compare faithfully.

    * Expression indexes (``started_at DESC``, PostgreSQL's text-search indexes) and the
      PostgreSQL-only objects of revision 0012.
    * Primary-key columns on SQLite: upstream declares ``id TEXT PRIMARY KEY`` without
      NOT NULL, which SQLite reflects as nullable, while the models rightly say a primary
      key is never NULL. The schema must stay upstream's, so that is not drift.
    * The Telegram topic tables on a SQLite database that lacks them: there they are
      created when topic mode is first used, so their absence is not drift.
    """
    if type_ == "index" and name in EXPRESSION_INDEXES:
        return False
    if (
        type_ == "table"
        and not reflected
        and compare_to is None
        and name in SQLITE_ON_DEMAND_TABLES
        and context.get_context().dialect.name == "sqlite"
    ):
        return False
    if type_ == "column" and reflected and (getattr(obj.table, "name", None), name) in BACKEND_ONLY_COLUMNS:
        return False
    return not (
        type_ == "column"
        and compare_to is not None
        and getattr(obj, "primary_key", False)
        and context.get_context().dialect.name == "sqlite"
    )


def scripts() -> History:
    """The history of the scripts being run (read from their files, cached)."""
    return history(context.script.dir)


def mirror_schema_version(ctx: Any, step: Any, heads: set[str], run_args: Any) -> None:
    """Keep upstream's ``schema_version`` equal to what the revision just reached leaves.

    0001–0011 are upstream versions 1–11; a later revision keeps the version before it
    unless its script declares ``schema_version = N`` (0019: 17); see
    :mod:`hermes_store.schema.revisions`.
    """
    if not heads:
        return  # at base: revision 0001's downgrade has dropped the table
    version = scripts().schema_version_of(next(iter(heads)))
    if version is None:
        return
    if step.is_upgrade and ctx.connection is not None and not ctx.as_sql:
        # An upgrade never writes a lower version than the file holds: an adopted upstream
        # file at 14 stays 14 through 0012-0018 (upstream would redo its data fixes on a
        # lower number), and revision 0019 reads it to know which fixes are still due.
        held = ctx.connection.exec_driver_sql("SELECT MAX(version) FROM schema_version").scalar()
        version = max(version, int(held or 0))
    ctx.impl.execute(sa.text("DELETE FROM schema_version"))
    ctx.impl.execute(sa.text(f"INSERT INTO schema_version (version) VALUES ({int(version)})"))


def refuse_lost_fts_triggers(ctx: Any, step: Any, heads: set[str], run_args: Any) -> None:
    """Roll back a revision that left ``messages`` without its FTS triggers (batch mode)."""
    if heads and ctx.connection is not None and not ctx.as_sql:
        migration_guard.check_fts_triggers(ctx.connection, next(iter(heads)), scripts())


def process_revision_directives(ctx: Any, revision: Any, directives: list[Any]) -> None:
    """``alembic revision``: number the new script after head, keep batch mode off messages."""
    migration_guard.unbatch_protected_tables(ctx, revision, directives)
    if getattr(config.cmd_opts, "rev_id", None) is None:
        for script in directives:
            script.rev_id = scripts().next_revision_id


def database_url() -> sa.URL:
    """The target URL: ``-x url=…``, then ``$HERMES_STORE_URL``, then the default path."""
    x_args = context.get_x_argument(as_dictionary=True)
    return resolve_url(x_args.get("url") or None)


def configure_options(schema: str | None = None) -> dict[str, Any]:
    """Options shared by the online and offline paths; ``schema``: a profile's, which holds
    Alembic's version table too."""
    profile = {"version_table_schema": schema} if schema else {}
    return {
        **profile,
        "target_metadata": target_metadata,
        "include_name": include_name,
        "include_object": include_object,
        # Batch mode for SQLite's missing ALTERs, but never on messages: rebuilding it
        # would drop the FTS triggers (hermes_store.schema.migration_guard).
        "render_as_batch": True,
        "process_revision_directives": process_revision_directives,
        "transaction_per_migration": True,
        "on_version_apply": [mirror_schema_version, refuse_lost_fts_triggers],
    }


CLIENT_CHECK_INTERVAL = "250ms"
APPLICATION_NAME = "hermes-store migration"


def run_migrations_offline() -> None:
    """Render the migrations as SQL (``alembic upgrade --sql``)."""
    url = database_url()
    schema = schema_of_url(url)
    context.configure(
        url=url,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        **configure_options(schema),
    )
    if context.get_context().dialect.name == "postgresql":
        for name, value in migration_ops.session_settings().items():
            context.execute(f"SET {name} = '{value}'")
        if schema:
            for statement in profile_schema_statements(schema):
                context.execute(statement)
            context.execute(f'SET search_path = "{schema}", public')
        if context.get_starting_revision_argument() in (None, "base"):
            # The script starts by creating Alembic's own version table, whose
            # VARCHAR(32) is Alembic's choice; the table is new, so no lock is at stake.
            context.get_context().impl.static_output(
                "-- squawk-ignore-file prefer-text-field -- Alembic's new alembic_version table"
            )
    with context.begin_transaction():
        context.run_migrations()


def prepare_server_session(connection: Connection) -> None:
    """Session settings and the migrators' advisory lock on PostgreSQL.

    The lock is the one every migrator takes (also the transaction-scoped one of older
    releases), so two replicas starting an upgrade at once run it one after the other;
    a killed migrator's lock goes with its server statement (``client_connection_check_interval``).
    Returns with no transaction open.
    """
    settings = dict(migration_ops.session_settings(), application_name=APPLICATION_NAME)
    if (connection.dialect.server_version_info or (0,)) >= (14,):
        settings["client_connection_check_interval"] = CLIENT_CHECK_INTERVAL
    for name, value in settings.items():
        connection.exec_driver_sql(f"SET {name} = '{value}'")
    connection.commit()
    take_migration_lock(connection)


def take_migration_lock(connection: Connection) -> None:
    """Wait up to :data:`MIGRATION_LOCK_WAIT_S` for the migrators' session advisory lock.

    Each attempt commits at once: a waiter that kept a transaction open would be one of
    the transactions the running migrator's ``CREATE INDEX CONCURRENTLY`` waits out, so
    replicas queueing behind a first deploy would stall the very build they wait for.
    """
    deadline = time.monotonic() + MIGRATION_LOCK_WAIT_S
    while True:
        taken = connection.exec_driver_sql(f"SELECT pg_try_advisory_lock({MIGRATION_LOCK_KEY})").scalar()
        connection.commit()
        if taken:
            return
        if time.monotonic() > deadline:
            raise migration_lock_wait_exceeded()
        time.sleep(LOCK_POLL_S)


def run_pooled_migrations(connection: Connection) -> None:
    """Migrate through a transaction pooler, where nothing outlives a transaction.

    One transaction takes the migrators' lock for itself (``pg_try_advisory_xact_lock``,
    the same key as the session lock) under the migration's settings for that transaction
    only, and then either builds an empty database whole, as a direct connection would, or
    finds it at head and leaves it. Any other migration holds a session lock and builds
    indexes concurrently, across transactions: it is refused in one line naming the direct
    connection it needs.
    """
    settings = dict(migration_ops.session_settings(), application_name=APPLICATION_NAME)
    deadline = time.monotonic() + MIGRATION_LOCK_WAIT_S
    while True:
        apply_for_transaction(connection, settings)
        if connection.exec_driver_sql(f"SELECT pg_try_advisory_xact_lock({MIGRATION_LOCK_KEY})").scalar():
            break
        connection.rollback()  # a waiter keeps no transaction open (see take_migration_lock)
        if time.monotonic() > deadline:
            raise migration_lock_wait_exceeded()
        time.sleep(LOCK_POLL_S)
    try:
        create_profile_schema(connection)
        present = table_names(connection)
        if present & SCHEMA_MARKERS:
            _refuse_pooled_upgrade(connection, present)
            return
        config.attributes["fresh_database"] = True
        options = dict(configure_options(store_schema(connection)), transaction_per_migration=False)
        context.configure(connection=connection, transactional_ddl=True, **options)
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
    finally:
        config.attributes.pop("fresh_database", None)
        if connection.in_transaction():
            connection.rollback()


def _refuse_pooled_upgrade(connection: Connection, present: set[str]) -> None:
    """Nothing to do for a database at head; a :class:`SchemaError` for any other migration."""
    current = None
    if "alembic_version" in present:
        # In the profile's schema, which holds it (the search path puts that schema first).
        current = connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    head = scripts().head
    if current == head and context.get_revision_argument() in ("head", head):
        return
    raise SchemaError(
        f"the database is at {current or 'a schema without a revision'}, not {head}, and migrating it "
        "needs a direct connection to PostgreSQL: its steps hold a session lock and build indexes "
        "concurrently, which a transaction pooler cannot carry; "
        "run 'hermes-store --url <the server's own URL> upgrade'"
    )


def holds_no_schema(connection: Connection) -> bool:
    """True when the database has none of our tables (read in a transaction of its own).

    Asked with the migrators' lock held, so the answer stays true until this migrator
    commits: no other migrator can have started on the database meanwhile.
    """
    present = table_names(connection)
    connection.commit()
    return not present & SCHEMA_MARKERS


def create_profile_schema(connection: Connection) -> None:
    """Create the schema of ``connection``'s profile if it is missing (no profile: nothing),
    in the caller's transaction. Run with the migrators' lock held: a profile's first
    statements must find its own schema first on the search path, never ``public``."""
    schema = store_schema(connection)
    if not schema:
        return
    # Only when missing: CREATE SCHEMA IF NOT EXISTS asks for CREATE on the database even
    # when the schema is there, and an administrator may have made it for a role without it.
    found = connection.execute(sa.text("SELECT 1 FROM pg_namespace WHERE nspname = :name"), {"name": schema})
    statements = profile_schema_statements(schema)
    for statement in statements if found.first() is None else statements[1:]:
        connection.exec_driver_sql(statement)


PROFILE_EXTENSIONS = ("pg_trgm", "btree_gin")
"""The extensions revisions 0011 and 0018 create. On a profile they are created in
``public`` first: created by the revisions, they would land in the first schema of the
search path, the profile's own, where no other profile would find them."""


def profile_schema_statements(schema: str) -> list[str]:
    """The statements that make a profile's schema, and the extensions every profile shares
    in ``public`` (the second schema of a profile's search path)."""
    extensions = [f"CREATE EXTENSION IF NOT EXISTS {name} SCHEMA public" for name in PROFILE_EXTENSIONS]
    return [f'CREATE SCHEMA IF NOT EXISTS "{schema}"', *extensions]


SCHEMA_MARKERS = frozenset({"alembic_version", "schema_version", "sessions", "messages"})
"""Tables whose presence means a schema (ours, upstream's, or a partial one) exists."""


def run_migrations_online() -> None:
    """Run the migrations against a live database."""
    supplied = config.attributes.get("connection")
    connectable: Engine | Connection
    if supplied is None:
        connectable = write_engine(create_engine(database_url(), prepare=True, poolclass=sa.pool.NullPool))
    else:
        connectable = supplied
    scope = nullcontext(connectable) if isinstance(connectable, Connection) else connectable.connect()
    with scope as connection:
        assert isinstance(connection, Connection)
        history_ = scripts()
        if not legacy.prepare_for_alembic(connection, history_.revisions, history_.head):
            return
        if connection.in_transaction() and not isinstance(supplied, Connection):
            connection.commit()
        server = connection.dialect.name == "postgresql" and not connection.in_transaction()
        if server and is_pooled(connection):
            run_pooled_migrations(connection)
            return
        if server:
            prepare_server_session(connection)
            create_profile_schema(connection)
            connection.commit()
        # An empty database serves nobody yet: it is built in one transaction, so other
        # openers see it empty or complete, and a killed build leaves it empty.
        fresh = server and holds_no_schema(connection)
        config.attributes["fresh_database"] = fresh
        options = configure_options(store_schema(connection))
        if fresh:
            options["transaction_per_migration"] = False
        context.configure(connection=connection, transactional_ddl=True, **options)
        try:
            with context.begin_transaction():
                context.run_migrations()
        finally:
            config.attributes.pop("fresh_database", None)
            if server and not connection.invalidated:
                # Ending the session releases the advisory lock and the migration's
                # settings (lock timeout, application name), which must not reach the
                # caller's pool.
                connection.invalidate()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
