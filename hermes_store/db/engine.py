"""Engines: how hermes_store connects to SQLite (and PostgreSQL).

SQLite needs three things pysqlite does not give by default:

* Transactions that we begin ourselves. pysqlite's legacy mode issues its own ``BEGIN``
  lazily and never around DDL, which breaks both ``BEGIN IMMEDIATE`` and transactional
  migrations. We switch the driver to autocommit on connect and emit ``BEGIN`` in the
  engine's ``begin`` event (SQLAlchemy's documented pysqlite recipe).
* Writers that take the write lock up front. A write engine (``write_engine(engine)``)
  begins with ``BEGIN IMMEDIATE`` so lock contention surfaces at ``BEGIN`` where the
  unit of work can retry it, instead of half-way through a transaction; reads begin a
  plain deferred transaction and never block writers in WAL mode.
* Per-connection pragmas: WAL (falling back to ``DELETE`` where WAL cannot work),
  ``foreign_keys``, a 1 s busy timeout and ``recursive_triggers``.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine, make_url

from hermes_store.db import profiles, transaction_pooler
from hermes_store.db.execution import driver_execute
from hermes_store.db.execution_options import NO_BEGIN_OPTION
from hermes_store.db.route_choice import remember_route
from hermes_store.db.server_options import split_options, statement_timeout_s
from hermes_store.db.urls import sync_driver_url
from hermes_store.domain.paths import default_db_path
from hermes_store.errors import DatabaseNotFound, MissingDriver, UnsafePath, UnsupportedURL

if TYPE_CHECKING:  # the sync store never imports SQLAlchemy's asyncio extension
    from sqlalchemy.ext.asyncio import AsyncEngine

STORE_URL_VARIABLE = "HERMES_STORE_URL"
BUSY_TIMEOUT_S = 1.0
_WRITE_OPTION = "hermes_store_write"
_CONFIGURED_KEY = "hermes_store_configured"
FILE_MODE = 0o600
_SIDECARS = ("-wal", "-shm", "-journal")
_NOT_A_WAL_REFUSAL = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_FULL", "SQLITE_IOERR", "SQLITE_READONLY")
DIR_MODE = 0o700
JournalMode = Literal["wal", "delete"]
# Engines whose connections this module configures (made by create_engine or adopted).
_CONFIGURED: weakref.WeakSet[Engine] = weakref.WeakSet()
SUPPORTED_BACKENDS = ("sqlite", "postgresql")
_SUPPORTED_HINT = "use a file path, sqlite:///PATH or postgresql+psycopg://USER@HOST/DATABASE"
# The extra that installs each backend's default driver.
_DRIVER_EXTRAS = {"psycopg": "postgres", "psycopg_async": "postgres"}


class JournalModeWarning(UserWarning):
    """WAL could not be enabled and the store fell back to the rollback journal."""


def resolve_url(target: str | os.PathLike[str] | URL | None = None) -> URL:
    """Turn a path, a SQLAlchemy URL (string or object) or ``None`` into a URL.

    ``None`` means the default store: ``$HERMES_STORE_URL`` if set, else the file
    ``$HERMES_HOME/state.db`` (``~/.hermes/state.db``), resolved now. A string containing
    ``://`` is a URL; anything else is a filesystem path. An asyncio driver in the URL
    (``sqlite+aiosqlite``, ``postgresql+asyncpg``, ``postgresql+psycopg_async``) becomes
    the sync driver for the same database, so a service's one URL serves this sync
    engine, Alembic and the CLI too.
    """
    if isinstance(target, URL):
        return sync_driver_url(target)
    if target is None:
        configured = os.environ.get(STORE_URL_VARIABLE, "").strip()
        if configured:
            return resolve_url(configured)
        return _sqlite_url(default_db_path())
    if isinstance(target, str) and "://" in target:
        return sync_driver_url(make_url(target))
    return _sqlite_url(Path(target))


def parse_url(url: str | URL) -> URL:
    """A SQLAlchemy URL from ``url``; a string that is not one raises :class:`UnsupportedURL`.

    Unlike :func:`resolve_url`, nothing here is taken as a file path, so a mistyped URL
    can never create a file named after it.
    """
    if isinstance(url, URL):
        return url
    if "://" not in url:
        raise UnsupportedURL(f"not a database URL: {url!r}; {_SUPPORTED_HINT}")
    try:
        return make_url(url)
    except sa.exc.ArgumentError:
        raise UnsupportedURL(f"not a database URL: {url!r}; {_SUPPORTED_HINT}") from None


def check_backend(url: URL) -> None:
    """Raise :class:`UnsupportedURL` unless ``url`` names SQLite or PostgreSQL."""
    if url.get_backend_name() not in SUPPORTED_BACKENDS:
        shown = url.render_as_string(hide_password=True)
        raise UnsupportedURL(f"hermes_store cannot open {shown!r}: unsupported database; {_SUPPORTED_HINT}")


def _sqlite_url(path: Path) -> URL:
    # Absolute, so that a relative name like "file:notes.db" is a file name, never read
    # by SQLite as a URI that would bypass the 0600 creation and symlink checks.
    return URL.create("sqlite", database=str(path.expanduser().absolute()))


def sqlite_path(url: URL) -> Path | None:
    """The file a SQLite URL points at, or ``None`` for in-memory and non-SQLite URLs."""
    if url.get_backend_name() != "sqlite":
        return None
    database = url.database
    if not database or database == ":memory:":
        return None
    if database.startswith("file:") and url.query.get("uri") == "true":
        # A SQLite URI filename (with uri=true), e.g. file:/path/state.db?vfs=unix-dotfile
        location = database[len("file:") :].split("?", 1)[0]
        in_memory = url.query.get("mode") == "memory" or url.query.get("vfs") == "memdb"
        if not location or location == ":memory:" or in_memory:
            return None
        return Path(location)
    return Path(database)


def prepare_sqlite_file(path: Path) -> None:
    """Create the database file owner-only (0600) before SQLite opens it.

    SQLite gives the ``-wal`` and ``-shm`` sidecars the permissions of the main file,
    so creating the main file 0600 makes all three private. A symbolic link planted at
    the path is refused rather than followed, so the store can never be tricked into
    writing through it into another file. A directory the store creates is 0700.
    """
    for candidate in (path, *(path.with_name(path.name + suffix) for suffix in _SIDECARS)):
        if candidate.is_symlink():
            raise UnsafePath(
                f"refusing to open {path}: {candidate} is a symbolic link; remove it or point "
                "the store at the real file"
            )
    missing: list[Path] = []
    ancestor = path.parent
    while not ancestor.exists():
        missing.append(ancestor)
        ancestor = ancestor.parent
    for directory in reversed(missing):
        # mkdir(parents=True) would give the intermediate directories the umask's mode.
        directory.mkdir(mode=DIR_MODE, exist_ok=True)
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, FILE_MODE)
    except FileExistsError:
        return
    except PermissionError:
        # A read-only directory: let SQLite report what it can open, with our mapping.
        return
    os.close(fd)


def create_engine(
    target: str | os.PathLike[str] | URL | None = None,
    *,
    prepare: bool = True,
    journal_mode: JournalMode | None = None,
    **engine_kwargs: Any,
) -> Engine:
    """Create an engine for ``target`` (a path, a SQLAlchemy URL, or the default database).

    ``prepare=True`` (the default here, for the store's own writers: ``SessionDB``,
    upgrades) creates a missing SQLite file 0600 (with 0700 folders where the store makes
    them) and switches it to WAL. ``prepare=False`` (readers, and the public
    :func:`hermes_store.create_engine`) uses the store exactly as it is: a path with no
    file behind it raises :class:`DatabaseNotFound`, nothing is created and the journal
    mode is left alone, so reading never changes a byte.

    ``journal_mode`` overrides that choice: ``"wal"`` (falling back to the rollback
    journal with a warning where WAL cannot work) or ``"delete"``, the rollback journal,
    for network file systems where WAL seems to work but is unsafe.

    Every SQLite connection gets ``foreign_keys=ON``, a 1 s busy timeout and
    ``recursive_triggers=ON``. Transactions begun on this engine are deferred (reads);
    use :func:`write_engine` for writes. ``profile=NAME`` (or ``?profile=NAME`` in the URL)
    points a PostgreSQL engine at that Hermes profile's schema
    (:mod:`hermes_store.db.profiles`). Extra keyword arguments go to
    :func:`sqlalchemy.create_engine`.
    """
    return build_engine(
        resolve_url(target),
        sa.create_engine,
        prepare=prepare,
        journal_mode=journal_mode,
        sqlite_connect_args=_connect_args_for_sqlite(),
        **engine_kwargs,
    )


E = TypeVar("E", "Engine", "AsyncEngine")


def build_engine(
    url: URL,
    make: Callable[..., E],
    *,
    prepare: bool,
    journal_mode: JournalMode | None,
    sqlite_connect_args: dict[str, Any],
    **engine_kwargs: Any,
) -> E:
    """The one engine factory behind :func:`create_engine` and
    :func:`hermes_store.db.async_engine.create_async_engine`: ``make`` is
    ``sqlalchemy.create_engine`` or ``sqlalchemy.ext.asyncio.create_async_engine``, and
    ``url`` names the driver it takes.

    Both get the same policy: the backend check; on SQLite the file's creation rules,
    the driver's busy timeout (``sqlite_connect_args``, the driver's own keys) and the
    per-connection pragmas and ``BEGIN`` hooks; on PostgreSQL the server options of
    :mod:`hermes_store.db.server_options` (pool, pre-ping, recycling, statement and lock
    timeouts, from the URL's query or keyword arguments), handed to whichever driver
    the URL names; a missing or unknown driver as a typed error.
    """
    check_backend(url)
    url = profiles.with_profile(url, engine_kwargs.pop("profile", None))
    if url.get_backend_name() != "sqlite":
        is_postgresql = url.get_backend_name() == "postgresql"
        reply_timeout_s = statement_timeout_s(url, engine_kwargs) if is_postgresql else 0.0
        url, pooler_declared = _declared_pooler(url)
        engine_kwargs = _profile_search_path(url, engine_kwargs)
        url, engine_kwargs = _server_engine_arguments(url, engine_kwargs)
        server_engine = _make(make, url, engine_kwargs)
        sync_side = server_engine if isinstance(server_engine, Engine) else server_engine.sync_engine
        if profiles.schema_of_url(url) is not None:
            profiles.install(sync_side)
        if reply_timeout_s and isinstance(server_engine, Engine) and url.get_driver_name() == "psycopg":
            # A server that stays reachable but never replies must not hold a writer forever.
            from hermes_store.db.reply_watchdog import watch_replies

            watch_replies(server_engine, reply_timeout_s)
        if is_postgresql:
            # Last: its do_connect listener makes the connection, with the parameters the
            # listeners before it (the watchdog's cursor factory) have set.
            transaction_pooler.install(sync_side, declared=pooler_declared)
        return server_engine
    if journal_mode is None and prepare:
        journal_mode = "wal"
    path = sqlite_path(url)
    if path is not None:
        if prepare:
            prepare_sqlite_file(path)
        elif not path.exists():
            raise DatabaseNotFound(
                f"no database at {path} (nothing was created); create one with "
                f"hermes_store.SessionDB({str(path)!r}) or 'hermes-store --db {path} upgrade'"
            )
    connect_args = {**sqlite_connect_args, **engine_kwargs.pop("connect_args", {})}
    engine = _make(make, url, {**engine_kwargs, "connect_args": connect_args})
    # Only the store's own writers (or an explicit journal_mode) choose the journal mode;
    # a reader leaves it as it is. An AsyncEngine runs these hooks on its sync engine.
    sync_engine: Engine = engine if isinstance(engine, Engine) else engine.sync_engine
    install_sqlite_hooks(sync_engine, path, journal_mode)
    return engine


def _declared_pooler(url: URL) -> tuple[URL, bool]:
    """The URL without its ``pooler`` option, and whether that option declares a
    transaction pooler (``transaction``; ``none`` or no option: found out on connecting)."""
    value = url.query.get(transaction_pooler.POOLER_OPTION)
    if value is None:
        return url, False
    if value not in ("transaction", "none"):
        raise ValueError(f"pooler must be 'transaction' or 'none', not {value!r}")
    return url.difference_update_query([transaction_pooler.POOLER_OPTION]), value == "transaction"


def _profile_search_path(url: URL, engine_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``engine_kwargs`` whose server options put the URL's profile schema first on the
    search path (unchanged without a profile). After the caller's own options, so that
    the profile wins over a ``search_path`` there."""
    schema = profiles.schema_of_url(url)
    if schema is None:
        return engine_kwargs
    connect_args = dict(engine_kwargs.get("connect_args") or {})
    existing = connect_args.get("options")
    path = profiles.search_path_option(schema)
    connect_args["options"] = f"{existing} {path}" if existing else path
    return {**engine_kwargs, "connect_args": connect_args}


def is_configured(engine: Engine) -> bool:
    """Whether ``engine``'s connections get hermes_store's settings (see :func:`adopt_engine`)."""
    return engine in _CONFIGURED or engine.dialect.name != "sqlite"


def adopt_engine(engine: Engine) -> Engine:
    """Give an engine made elsewhere the settings of :func:`create_engine`, in place.

    A plain ``sqlalchemy.create_engine("sqlite:///…")`` would run the store with the
    rollback journal, ``foreign_keys`` off and deferred write transactions. Its
    connections — also those already pooled, configured on their next checkout — get
    WAL, the pragmas and ``BEGIN IMMEDIATE`` for writes. Other backends need nothing.
    Returns ``engine``; adopting twice is harmless.
    """
    if is_configured(engine):
        return engine
    path = sqlite_path(engine.url)
    if path is not None:
        prepare_sqlite_file(path)
    journal = JournalModeState()

    @sa.event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        # Connections pooled before adoption never saw a connect event of ours.
        if not record.info.get(_CONFIGURED_KEY):
            configure_sqlite_connection(dbapi_connection, journal, path)
            record.info[_CONFIGURED_KEY] = True

    _listen_begin(engine)
    _CONFIGURED.add(engine)
    return engine


def write_engine(engine: Engine) -> Engine:
    """The same engine (same pool) whose transactions take the write lock at ``BEGIN``.

    On SQLite this means ``BEGIN IMMEDIATE``; other backends take row locks as they go.
    """
    return engine.execution_options(**{_WRITE_OPTION: True})


def connect_for_writes(engine: Engine) -> sa.Connection:
    """A connection of ``engine`` whose transactions take the write lock at ``BEGIN``, as
    :func:`write_engine`'s do, made from ``engine`` itself rather than from an option
    engine: the events of an option engine's connections are looked up through one more
    level of SQLAlchemy's dispatchers, and the store asks who listens at every write
    (:func:`hermes_store.db.route_choice.decide_route`: 2.5 µs instead of 4.6 µs)."""
    return engine.connect().execution_options(**{_WRITE_OPTION: True})


def _connect_args_for_sqlite() -> dict[str, Any]:
    args: dict[str, Any] = {"timeout": BUSY_TIMEOUT_S, "check_same_thread": False}
    if sys.version_info >= (3, 12):
        # Pin the mode our recipe is written for; Python's default is due to change.
        args["autocommit"] = sqlite3.LEGACY_TRANSACTION_CONTROL
    return args


def install_sqlite_hooks(engine: Engine, path: Path | None, journal_mode: JournalMode | None = "wal") -> None:
    """The per-connection pragmas and our own ``BEGIN`` on a SQLite engine.

    Shared by the sync engine and the asyncio one (``AsyncEngine.sync_engine``): both run
    these hooks synchronously inside SQLAlchemy, on a sqlite3 or an adapted aiosqlite
    connection.
    """
    journal = JournalModeState(journal_mode) if journal_mode else None

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        configure_sqlite_connection(dbapi_connection, journal, path)

    _listen_begin(engine)
    _CONFIGURED.add(engine)


def _listen_begin(engine: Engine) -> None:
    @sa.event.listens_for(engine, "begin")
    def _on_begin(connection: sa.Connection) -> None:
        route = remember_route(connection)
        options = connection.get_execution_options()
        if options.get(NO_BEGIN_OPTION):
            return
        # SQLAlchemy's documented pysqlite recipe, through the execution seam (so that
        # events see BEGIN too, at little cost: this runs once per transaction).
        sql = "BEGIN IMMEDIATE" if options.get(_WRITE_OPTION) else "BEGIN"
        driver_execute(connection, sql, begin=False, route=route)


def configure_sqlite_connection(
    dbapi_connection: Any, journal: JournalModeState | None, path: Path | None
) -> None:
    """Per-connection set-up: WAL (or the DELETE fallback), foreign keys, busy timeout.

    ``dbapi_connection`` is a sqlite3 connection or SQLAlchemy's adapted aiosqlite one
    (both offer the same synchronous cursor API inside SQLAlchemy's event hooks).
    """
    # Hand transaction control to SQLAlchemy's begin event (pysqlite recipe).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        if journal is not None:  # None: a reader, which leaves the journal mode as it is
            journal.apply(cursor, path)
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        # Without this, REPLACE-style deletes skip the FTS delete triggers.
        cursor.execute("PRAGMA recursive_triggers=ON")
    finally:
        cursor.close()


def keeps_rollback_journal(cursor: Any) -> bool:
    """Whether the connected file already has a schema and a journal mode other than WAL
    (``cursor``: a DB-API cursor on it).

    The journal mode of an existing file is its owner's choice, never changed by the
    store: upstream Hermes keeps files out of WAL on SQLite builds with the WAL-reset bug,
    and a file a program keeps in the rollback journal stays there. Only a new (empty)
    file is switched to WAL.
    """
    cursor.execute("PRAGMA journal_mode")
    row = cursor.fetchone()
    if row is not None and str(row[0]).lower() == "wal":
        return False
    cursor.execute("PRAGMA page_count")
    pages = cursor.fetchone()
    return pages is not None and int(pages[0]) > 0


class JournalModeState:
    """Turns WAL on for each connection, warning once per engine if it must fall back."""

    def __init__(self, wanted: JournalMode = "wal") -> None:
        self.wanted = wanted
        self.warned = False

    def apply(self, cursor: Any, path: Path | None) -> None:
        """Turn WAL on through ``cursor`` (a DB-API cursor), else fall back to DELETE."""
        if path is None:
            return
        if self.wanted == "delete":
            cursor.execute("PRAGMA journal_mode=DELETE")
            return
        if keeps_rollback_journal(cursor):
            return
        try:
            # fetchone() on the cursor, not on execute()'s result: adapted async cursors
            # return the driver's awaitable cursor from execute().
            cursor.execute("PRAGMA journal_mode=WAL")
            row = cursor.fetchone()
            mode = str(row[0]).lower() if row else ""
        except sqlite3.OperationalError as exc:
            # Lock contention and storage failures (full disk, I/O) are real errors, not a
            # file system without WAL support; let the caller see and classify them.
            name = str(getattr(exc, "sqlite_errorname", ""))
            if "locked" in str(exc).lower() or name.startswith(_NOT_A_WAL_REFUSAL):
                raise
            mode = f"error: {exc}"
        if mode == "wal":
            return
        cursor.execute("PRAGMA journal_mode=DELETE")
        if not self.warned:
            self.warned = True
            warnings.warn(
                f"WAL journal mode is unavailable for {path} ({mode or 'refused'}); "
                "using journal_mode=DELETE — readers and writers will block each other more",
                JournalModeWarning,
                stacklevel=2,
            )


def _server_engine_arguments(url: URL, engine_kwargs: dict[str, Any]) -> tuple[URL, dict[str, Any]]:
    """The URL and ``create_engine`` arguments for a database server."""
    if url.get_backend_name() != "postgresql":
        return url, {"pool_pre_ping": True, **engine_kwargs}
    if url.get_driver_name() in ("", "psycopg2"):
        # psycopg 3 is the driver we ship an extra for.
        url = url.set(drivername="postgresql+psycopg")
    # Pool size, pre-ping, recycling and server timeouts (docs/postgresql.md).
    url, engine_kwargs = split_options(url, engine_kwargs)
    if url.get_driver_name() == "asyncpg":
        engine_kwargs["connect_args"] = asyncpg_connect_args(engine_kwargs.get("connect_args", {}))
    return url, engine_kwargs


# libpq connection keywords with an asyncpg equivalent, and those asyncpg has none for
# (TCP keepalives: asyncpg leaves them to the operating system's defaults).
_ASYNCPG_KEYWORDS = {"connect_timeout": "timeout"}
_LIBPQ_ONLY = frozenset({"keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count"})


def asyncpg_connect_args(connect_args: dict[str, Any]) -> dict[str, Any]:
    """libpq-style connect arguments (what :mod:`~hermes_store.db.server_options` makes,
    for psycopg) in asyncpg's terms: ``options="-c name=value …"`` becomes
    ``server_settings``, ``connect_timeout`` becomes ``timeout``. An ``options`` part
    that is not ``-c name=value`` raises ``ValueError`` (asyncpg could not send it)."""
    translated = {key: value for key, value in connect_args.items() if key not in _LIBPQ_ONLY}
    options = str(translated.pop("options", "") or "")
    settings = dict(transaction_pooler.SERVER_SETTING.findall(options))
    if transaction_pooler.SERVER_SETTING.sub("", options).strip():
        raise ValueError(f"asyncpg takes only '-c name=value' server settings in options, not {options!r}")
    if settings:
        translated["server_settings"] = {**settings, **translated.get("server_settings", {})}
    for libpq, asyncpg in _ASYNCPG_KEYWORDS.items():
        if libpq in translated:
            translated.setdefault(asyncpg, float(translated.pop(libpq)))
    return translated


def _make(make: Callable[..., E], url: URL, engine_kwargs: dict[str, Any]) -> E:
    try:
        return make(url, **engine_kwargs)
    except sa.exc.NoSuchModuleError:
        shown = url.render_as_string(hide_password=True)
        message = f"hermes_store cannot open {shown!r}: unknown driver; {_SUPPORTED_HINT}"
        raise UnsupportedURL(message) from None
    except ImportError as exc:
        raise MissingDriver(_missing_driver_message(url, exc)) from None


def _missing_driver_message(url: URL, exc: ImportError) -> str:
    driver = url.get_driver_name() or url.get_backend_name()
    extra = _DRIVER_EXTRAS.get(driver)
    install = f"pip install 'hermes-store[{extra}]'" if extra else f"install the {driver} package"
    return f"the {driver} driver for {url.get_backend_name()} is not installed ({exc.name or exc}); {install}"


def file_mode(path: Path) -> int:
    """The permission bits of ``path`` (for diagnostics and tests)."""
    return stat.S_IMODE(path.stat().st_mode)
