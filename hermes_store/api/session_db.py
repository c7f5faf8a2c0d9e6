"""``SessionDB``: upstream Hermes' session-store API over hermes_store's layers.

A drop-in replacement for ``hermes_state.SessionDB`` (schema version 17): the same
methods, parameters, defaults, return shapes (plain dicts) and errors, with the
improvements described in docs/upstream.md. The facade holds no SQL: it translates the
dict API onto the repositories and runs each write through the unit of work.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, NoReturn, TypeVar, cast

from sqlalchemy import exc as sa_exc
from sqlalchemy import orm
from sqlalchemy.engine import URL, Connection, Engine

from hermes_store.api.features.archive import ArchiveMethods
from hermes_store.api.features.base import FacadeBase
from hermes_store.api.features.compaction import CompactionMethods
from hermes_store.api.features.compression_locks import CompressionLockMethods
from hermes_store.api.features.fts_maintenance import READ_ONLY_ERROR, FtsMaintenanceMethods
from hermes_store.api.features.gateway_peers import GatewayPeerMethods
from hermes_store.api.features.handoff import HandoffMethods
from hermes_store.api.features.hygiene import HygieneMethods
from hermes_store.api.features.message_views import MessageViewMethods
from hermes_store.api.features.rewind import RewindMethods
from hermes_store.api.features.session_meta import SessionMetaMethods
from hermes_store.api.features.session_search import SessionLookupMethods
from hermes_store.api.features.sweeps import TimedBudget, sweep_in_batches
from hermes_store.api.features.telegram_topics import TelegramTopicMethods
from hermes_store.api.features.workspace import WorkspaceMethods
from hermes_store.db.engine import (
    BUSY_TIMEOUT_S,
    adopt_engine,
    create_engine,
    parse_url,
    resolve_url,
    sqlite_path,
    write_engine,
)
from hermes_store.db.execution import Bind
from hermes_store.db.memory import is_shared_memory, names_memory, shared_memory_url
from hermes_store.db.profiles import PROFILE_OPTION, with_profile
from hermes_store.domain import codec
from hermes_store.domain.progress import ProgressFn
from hermes_store.domain.titles import MAX_TITLE_LENGTH, sanitize_title
from hermes_store.domain.transcripts import remove_transcripts
from hermes_store.domain.validation import (
    optional_int,
    optional_str,
    require_count,
    require_finite,
    require_str,
)
from hermes_store.errors import ServerUnavailable, StoreClosed, StoreError
from hermes_store.repository import (
    conversation,
    fts_maintenance,
    lineage,
    listing,
    maintenance,
    messages,
    meta,
    sessions,
    system_prompts,
)
from hermes_store.schema.migrate import ensure_schema, refuse_empty_profile, refuse_unfinished_copy
from hermes_store.search.cjk import contains_cjk, count_cjk, is_cjk_codepoint
from hermes_store.search.engine import SearchFilters, search
from hermes_store.search.order import search_order
from hermes_store.search.plan import plan_search
from hermes_store.search.sanitize import sanitize_fts5_query
from hermes_store.uow.fork_safety import forget_in_child
from hermes_store.uow.standby_reads import StandbyReads
from hermes_store.uow.unit_of_work import (
    CHECKPOINT_EVERY_N_WRITES,
    MAX_ATTEMPTS,
    RETRY_MAX_S,
    RETRY_MIN_S,
    UnitOfWork,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

_SESSION_KEYWORDS = frozenset(
    {
        "model",
        "model_config",
        "system_prompt",
        "user_id",
        "parent_session_id",
        "session_key",
        "chat_id",
        "chat_type",
        "thread_id",
        "cwd",
    }
)


WritePlan = tuple[Callable[[Connection], Any], str]
"""A write not yet run: the work for a Core connection, and what it is for errors."""


def raise_for_caller(exc: sa_exc.StatementError) -> NoReturn:
    """Raise what a write of either face shows its caller for SQLAlchemy's wrapped ``exc``:
    the driver's ``IntegrityError``, which upstream callers catch
    (``sqlite3.IntegrityError``), and a ``ValueError``/``TypeError`` a column type raised
    for the caller's value (e.g. bytes on PostgreSQL), as that error; others unchanged.

    Called from the writes' ``except`` clause rather than being a context manager: it
    guards every append, where entering and leaving a generator-based context manager
    costs about 3 µs."""
    if isinstance(exc, sa_exc.IntegrityError) and isinstance(exc.orig, BaseException):
        raise exc.orig from exc
    if isinstance(exc.orig, ValueError | TypeError):
        raise exc.orig from exc
    raise exc


_LANDED: dict[str, Callable[[Connection, Any], bool]] = {
    "appending a message": lambda db, message_id: messages.stored(db, [message_id]),
    "appending messages": lambda db, message_ids: messages.stored(db, message_ids),
}
"""The writes whose ``COMMIT`` outcome the store settles itself when it got no answer, by
their operation name: how to see from their result whether they landed."""
_SETTLE_POLL_S = 0.2


def _standby_reads(
    primary: Engine, read_urls: Sequence[str | URL], max_lag_s: float, engine_options: dict[str, Any]
) -> StandbyReads:
    """The standbys of a PostgreSQL store, each with an engine of the primary's settings."""
    if primary.dialect.name != "postgresql":
        raise ValueError("read_urls name PostgreSQL standbys; this store is not on PostgreSQL")
    if not max_lag_s >= 0:
        raise ValueError(f"max_standby_lag_s must be a number of seconds >= 0, not {max_lag_s!r}")
    # A standby is read in the primary's profile: without it, its reads would go to public.
    profile = primary.url.query.get(PROFILE_OPTION)
    named = profile if isinstance(profile, str) else None
    engines = [
        create_engine(with_profile(parse_url(url) if isinstance(url, str) else url, named), **engine_options)
        for url in read_urls
    ]
    return StandbyReads.of(engines, max_lag_s)


def _restore_pooled_driver(driver: Any) -> None:
    """Undo what ``_conn`` set on a driver connection before it returns to the pool: the
    pool may be a caller's (``SessionDB(engine=…)``), whose next user would otherwise get
    ``sqlite3.Row`` rows or, on a server, an autocommit connection where it expects
    transactions."""
    if isinstance(driver, sqlite3.Connection):
        driver.row_factory = None
    elif getattr(driver, "autocommit", False):
        driver.autocommit = False


def _read_only_engine(url: URL, engine_options: dict[str, Any]) -> Engine:
    """An engine that opens the store read-only: on SQLite the file in ``mode=ro`` (it
    must exist; nothing is created, migrated or switched to WAL); on a server an ordinary
    engine, the store refusing writes itself."""
    path = sqlite_path(url)
    if url.get_backend_name() == "sqlite" and path is None:
        raise ValueError("read_only=True needs a database file or a server URL, not an in-memory database")
    if path is None:
        return create_engine(url, prepare=False, **engine_options)

    def connect_read_only() -> sqlite3.Connection:
        uri = f"{path.resolve().as_uri()}?mode=ro"
        return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)

    return create_engine(url, prepare=False, creator=connect_read_only, **engine_options)


def _forget_raw_connection(db: SessionDB) -> list[object]:
    """In a forked child: drop the parent's ``_conn`` connection (see uow.fork_safety)."""
    inherited, db._raw = db._raw, None
    return [inherited]


class SessionDB(
    # Feature mixins (hermes_store.api.features), one per line.
    HygieneMethods,
    WorkspaceMethods,
    SessionMetaMethods,
    CompactionMethods,
    RewindMethods,
    MessageViewMethods,
    CompressionLockMethods,
    GatewayPeerMethods,
    HandoffMethods,
    TelegramTopicMethods,
    ArchiveMethods,
    SessionLookupMethods,
    FtsMaintenanceMethods,
    FacadeBase,
):
    """Hermes' session store: sessions, messages, titles, lineage, search, export, pruning.

    ``SessionDB()`` opens ``$HERMES_HOME/state.db`` (else ``~/.hermes/state.db``);
    ``db_path`` may be a ``str`` or ``Path``, or a SQLAlchemy URL string such as
    ``postgresql+psycopg://…`` (``url=`` says the same explicitly). Opening a SQLite file
    creates or upgrades its schema (adopting legacy upstream files). Opening a server
    database creates the schema only when the database is empty: one behind head is used
    as it is when this release can run on it (with a warning naming ``hermes-store
    upgrade``) or refused with :class:`~hermes_store.errors.SchemaBehind`;
    ``auto_upgrade=True`` upgrades it on open instead (development). Safe to share between threads;
    several processes may share one SQLite file. Extra keyword arguments configure a
    server's pool and timeouts (``pool_size``, ``max_overflow``, ``pool_pre_ping``,
    ``pool_recycle``, ``statement_timeout``, ``lock_timeout``; see docs/postgresql.md).
    ``read_urls`` name PostgreSQL hot standbys: reads go to one that has replayed this
    store's writes and lags at most ``max_standby_lag_s``, else to the primary
    (:mod:`hermes_store.uow.standby_reads`). ``profile=NAME`` (or ``?profile=NAME`` in the
    URL) keeps a PostgreSQL store in the schema of that Hermes profile, created on its
    first open (:mod:`hermes_store.db.profiles`).
    """

    MAX_TITLE_LENGTH: ClassVar[int] = MAX_TITLE_LENGTH
    _WRITE_MAX_RETRIES: ClassVar[int] = MAX_ATTEMPTS
    _WRITE_RETRY_MIN_S: ClassVar[float] = RETRY_MIN_S
    _WRITE_RETRY_MAX_S: ClassVar[float] = RETRY_MAX_S
    _CHECKPOINT_EVERY_N_WRITES: ClassVar[int] = CHECKPOINT_EVERY_N_WRITES
    _CONTENT_JSON_PREFIX: ClassVar[str] = codec.CONTENT_JSON_PREFIX

    def __init__(
        self,
        db_path: str | os.PathLike[str] | None = None,
        *,
        url: str | URL | None = None,
        engine: Engine | None = None,
        auto_upgrade: bool = False,
        read_only: bool = False,
        read_urls: Sequence[str | URL] = (),
        max_standby_lag_s: float = 5.0,
        **engine_options: Any,
    ) -> None:
        self.read_only = read_only
        self._standby_reads: StandbyReads | None = None
        # A url= that is not a URL is a mistake, never a file name (no stray files).
        target: str | os.PathLike[str] | URL | None = parse_url(url) if url is not None else (db_path or None)
        if engine is None and names_memory(target):
            # One database all the store's connections share (hermes_store.db.memory).
            target = shared_memory_url()
        self._url = engine.url if engine is not None else resolve_url(target)
        # A caller's engine gets the settings of our own (WAL, foreign keys, BEGIN
        # IMMEDIATE) but stays the caller's: close() leaves its pool alone.
        # engine_options: pool and timeout settings for a server (docs/postgresql.md).
        if read_only:
            self.engine = engine if engine is not None else _read_only_engine(self._url, engine_options)
        else:
            self.engine = (
                adopt_engine(engine)
                if engine is not None
                else create_engine(self._url, prepare=True, **engine_options)
            )
        self.db_path = sqlite_path(self._url)
        # Holds an in-memory database alive while the store is open (closed by close()).
        self._memory_anchor = self.engine.raw_connection() if is_shared_memory(self._url) else None
        try:
            if not read_only:  # a read-only store is used as it is: never created or upgraded
                ensure_schema(self.engine, auto_upgrade=auto_upgrade)
            else:
                refuse_empty_profile(self.engine)
                refuse_unfinished_copy(self.engine)
        except BaseException:
            self._release_engine(owned=engine is None)
            raise
        if not read_only and self.db_path is not None:
            self._detach_unloadable_cjk_index()
        self._uow = UnitOfWork(self.engine, owns_engine=engine is None)
        if read_urls:
            self._standby_reads = _standby_reads(self.engine, read_urls, max_standby_lag_s, engine_options)
        self._raw: Any = None
        forget_in_child(self, _forget_raw_connection)
        self._closed = False

    def _detach_unloadable_cjk_index(self) -> None:
        """Keep message writes working beside upstream's optional CJK index when this
        process cannot load its tokenizer (as upstream does: its triggers go, the index is
        marked stale for a Hermes that can rebuild it). Runs on connections that go back to
        the pool, before the unit of work keeps any; best effort, as upstream's: a locked
        file is tried again on the next open, and until then its message writes fail."""
        try:
            with self.engine.connect() as connection:
                if not fts_maintenance.cjk_index_unloadable(connection):
                    return
        except sa_exc.OperationalError as exc:  # a locked file: the next open looks again
            log.debug("%s: the CJK index check is left for the next open (%s)", self.db_path, exc.orig)
            return
        try:
            with write_engine(self.engine).begin() as connection:
                fts_maintenance.detach_cjk_index(connection)
        except sa_exc.OperationalError as exc:
            log.warning("%s: could not detach Hermes' CJK index (%s)", self.db_path, exc.orig)
            return
        log.warning(
            "%s: Hermes' CJK index needs a tokenizer this process cannot load; its triggers were "
            "dropped and the index marked stale (a Hermes with the tokenizer rebuilds it)",
            self.db_path,
        )

    @property
    def unit_of_work(self) -> UnitOfWork:
        """The store's unit of work, for services that compose their own writes.

        ``db.unit_of_work.write(fn, "what")`` runs ``fn(session)`` in one retried write
        transaction and returns its result; ``with db.unit_of_work.read() as session:``
        gives a read-only session. Inside them call the repository functions
        (:mod:`hermes_store.repository`), never another ``SessionDB`` write (that raises
        :class:`~hermes_store.errors.NestedWrite`). See the README, "Composing writes".
        """
        self._check_open()
        return self._uow

    # --- upstream-compatible internals ---------------------------------------------

    @property
    def _lock(self) -> threading.Lock:
        """The in-process writer lock (upstream tests hold it around raw ``_conn`` use)."""
        return self._uow._lock

    @property
    def _write_count(self) -> int:
        return self._uow.write_count

    @property
    def _conn(self) -> sqlite3.Connection | None:
        """A raw autocommit ``sqlite3`` connection with ``sqlite3.Row`` rows (SQLite only).

        Kept for code written against upstream, which used one connection directly.
        ``None`` after :meth:`close`.
        """
        if self._closed:
            return None
        if self._raw is None:
            self._raw = self.engine.raw_connection()
            driver = self._raw.driver_connection
            if isinstance(driver, sqlite3.Connection):
                driver.row_factory = sqlite3.Row
            elif hasattr(driver, "autocommit"):
                driver.autocommit = True  # like upstream's sqlite3 connection
        driver_connection: Any = self._raw.driver_connection
        return driver_connection  # type: ignore[no-any-return]

    def _execute_write(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn(connection)`` in one retried write transaction (upstream's primitive)."""
        self._check_open()

        def work(db: Connection) -> T:
            return fn(db.connection.driver_connection)

        return self._write(work, "a raw write")

    def _write(self, work: Callable[[Connection], T], operation: str) -> T:
        if self._closed:  # _check_open, inline: this runs for every write
            self._check_open()
        if self.read_only:
            raise sqlite3.OperationalError(READ_ONLY_ERROR)
        try:
            result = self._uow.write_connection(work, operation)
        except sa_exc.StatementError as exc:
            raise_for_caller(exc)
        except ServerUnavailable as lost:
            if not lost.outcome_unknown or operation not in _LANDED:
                raise
            result = self._settle_lost_commit(lost, work, operation)
        if self._standby_reads is not None:
            self._note_write_position()
        return result

    def _settle_lost_commit(
        self, lost: ServerUnavailable, work: Callable[[Connection], T], operation: str
    ) -> T:
        """After a ``COMMIT`` that got no answer (the connection broke, the primary failed
        over): look for what the write stored, on a fresh connection, for as long as a
        write waits for the server to come back. Landed: its result, as if the answer had
        come. Not landed: the write runs again (it is not in the database, so it cannot be
        applied twice). The server still gone: ``lost`` as it was."""
        deadline = time.monotonic() + self._uow.reconnect_wait_s
        while True:
            try:
                with self._uow.read_connection() as connection:
                    landed = _LANDED[operation](connection, lost.uncommitted_result)
                break
            except ServerUnavailable:
                if time.monotonic() >= deadline:
                    raise lost from None
                time.sleep(_SETTLE_POLL_S)
        if landed:
            return cast(T, lost.uncommitted_result)
        return self._uow.write_connection(work, operation)

    def _note_write_position(self) -> None:
        """Where the primary's WAL stands after a write: reads wait for a standby past it."""
        assert self._standby_reads is not None
        with self._uow.read_connection() as connection:
            self._standby_reads.note_write(connection)

    def _read(self, work: Callable[[orm.Session], T]) -> T:
        """Run ``work`` with an ORM session in a read transaction (kept for the CLI)."""
        self._check_open()
        with self._uow.read() as db:
            return work(db)

    def _query(self, work: Callable[[Bind], T], snapshot: bool = False) -> T:
        """Run ``work`` on a read connection: the facade's cheap read path. Reads of more
        than one statement that must agree with each other ask for a ``snapshot``."""
        self._check_open()
        if self._standby_reads is not None:
            return self._standby_reads.run(work, lambda: self._query_primary(work, snapshot))
        return self._query_primary(work, snapshot)

    def _query_primary(self, work: Callable[[Bind], T], snapshot: bool) -> T:
        with self._uow.read_connection(snapshot) as connection:
            return work(connection)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed()

    def _step_aside(self, seconds: float) -> None:
        self._uow._pause(seconds)

    # --- static helpers --------------------------------------------------------------

    sanitize_title = staticmethod(sanitize_title)
    _sanitize_fts5_query = staticmethod(sanitize_fts5_query)
    _contains_cjk = staticmethod(contains_cjk)
    _count_cjk = staticmethod(count_cjk)

    @staticmethod
    def _is_cjk_codepoint(cp: int | str) -> bool:
        """Whether a code point (or one-character string) is CJK."""
        return is_cjk_codepoint(ord(cp) if isinstance(cp, str) else cp)

    # Classmethods, as upstream's: Hermes' own tests patch ``SessionDB._encode_content``
    # (calling the original through ``__func__``) to inject a storage failure, so every
    # write path encodes content through this seam, never around it.
    @classmethod
    def _encode_content(cls, content: Any) -> Any:
        """Content as stored: lists and dicts become the ``\x00json:`` sentinel text."""
        return codec.encode_content(content)

    @classmethod
    def _decode_content(cls, content: Any) -> Any:
        """Reverse :meth:`_encode_content`; other values come back unchanged."""
        return codec.decode_content(content)

    # --- session lifecycle ---------------------------------------------------------

    def _insert_session(self, session_id: str, source: str, fields: dict[str, Any]) -> str:
        unknown = set(fields) - _SESSION_KEYWORDS
        if unknown:
            raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
        require_str("session_id", session_id)
        require_str("source", source)
        for name in _SESSION_KEYWORDS - {"model_config"}:
            optional_str(name, fields.get(name))
        values = dict(fields)
        values["model_config"] = codec.encode_json(values.get("model_config"))
        self._write(
            lambda db: sessions.insert_session(db, session_id, source, **values), "creating a session"
        )
        return session_id

    def create_session(self, session_id: str, source: str, **kwargs: Any) -> str:
        """Create a session, or fill in the missing details of an existing one.

        Keywords: ``model``, ``model_config`` (dict, stored as JSON), ``system_prompt``,
        ``user_id``, ``parent_session_id``, ``session_key``, ``chat_id``, ``chat_type``,
        ``thread_id``, ``cwd``; any other raises ``TypeError``. When the session exists,
        each of those except ``user_id`` is stored only where the row still has none;
        ``source``, ``user_id`` and ``started_at`` never change. Returns ``session_id``.
        A parent that does not exist raises ``sqlite3.IntegrityError``.
        """
        return self._insert_session(session_id, source, kwargs)

    def ensure_session(
        self, session_id: str, source: str = "unknown", model: str | None = None, **kwargs: Any
    ) -> str:
        """:meth:`create_session` with ``source`` defaulting to ``"unknown"``; returns the id."""
        return self._insert_session(session_id, source, {"model": model, **kwargs})

    def end_session(self, session_id: str, end_reason: str) -> None:
        """Mark a session ended with ``end_reason``; the first end wins."""
        require_str("session_id", session_id)
        optional_str("end_reason", end_reason)
        self._write(lambda db: sessions.end(db, session_id, end_reason), "ending a session")

    def reopen_session(self, session_id: str) -> None:
        """Clear a session's ``ended_at`` and ``end_reason``."""
        self._write(lambda db: sessions.reopen(db, session_id), "reopening a session")

    def update_system_prompt(self, session_id: str, system_prompt: str) -> None:
        """Store the session's system prompt."""
        optional_str("system_prompt", system_prompt)
        self._write(
            lambda db: system_prompts.store(db, session_id, system_prompt)
            or sessions.set_column(db, session_id, system_prompt=system_prompt),
            "updating a system prompt",
        )

    def update_token_counts(
        self,
        session_id: str,
        input_tokens: int = 0,
        output_tokens: int = 0,
        model: str | None = None,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        reasoning_tokens: int = 0,
        estimated_cost_usd: float | None = None,
        actual_cost_usd: float | None = None,
        cost_status: str | None = None,
        cost_source: str | None = None,
        pricing_version: str | None = None,
        billing_provider: str | None = None,
        billing_base_url: str | None = None,
        billing_mode: str | None = None,
        api_call_count: int = 0,
        absolute: bool = False,
    ) -> None:
        """Add token/cost figures to a session (or set them, with ``absolute=True``).

        A missing session is created (source ``"unknown"``) in the same transaction, so
        no figure is ever lost to a session whose creation failed earlier. Incremental mode
        treats NULL counters as 0. ``model`` and billing fields keep their first non-NULL
        value (a model switch overwrites them through ``update_session_model`` and
        ``update_session_billing_route``).
        """
        usage = sessions.TokenUsage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_tokens,
            reasoning_tokens=reasoning_tokens,
            estimated_cost_usd=estimated_cost_usd,
            actual_cost_usd=actual_cost_usd,
            cost_status=cost_status,
            cost_source=cost_source,
            pricing_version=pricing_version,
            billing_provider=billing_provider,
            billing_base_url=billing_base_url,
            billing_mode=billing_mode,
            model=model,
            api_call_count=api_call_count,
        )
        self._write(
            lambda db: sessions.apply_token_usage(db, session_id, usage, absolute),
            "updating token counts",
        )

    def prune_empty_ghost_sessions(self, sessions_dir: str | os.PathLike[str] | None = None) -> int:
        """Delete ended, untitled, message-less ``tui`` sessions older than a day.

        Their children are detached (``parent_session_id = NULL``), not deleted.
        Returns how many were deleted.
        """
        cutoff = time.time() - 86400
        deleted = sweep_in_batches(
            self, lambda db: sessions.delete_ghosts(db, cutoff), "pruning ghost sessions", sessions_dir
        )
        return len(deleted)

    # --- lookup ----------------------------------------------------------------------

    def get_session(self, session_id: str) -> dict[str, Any] | None:
        """All columns of a session as a dict, or ``None``."""
        return self._query(lambda db: sessions.get_row(db, session_id))

    def resolve_session_id(self, session_id_or_prefix: str) -> str | None:
        """The exact id, else the only id with this prefix; ``None`` if none or ambiguous."""
        if not session_id_or_prefix:
            return None
        return self._query(lambda db: sessions.resolve_id_prefix(db, session_id_or_prefix), snapshot=True)

    # --- titles ----------------------------------------------------------------------

    def set_session_title(self, session_id: str, title: str | None) -> bool:
        """Set (or, with an empty title, clear) a session's title; ``False`` if no session.

        A title held by a session this one continues after compression moves here (the
        ancestor's title is cleared in the same transaction). Raises ``ValueError`` for a
        title over 100 characters or one any other session holds.
        """
        clean = sanitize_title(title)
        return self._write(lambda db: sessions.set_title(db, session_id, clean), "setting a title")

    def get_session_title(self, session_id: str) -> str | None:
        """The session's title, or ``None``."""
        row = self.get_session(session_id)
        return None if row is None else row["title"]

    def get_session_by_title(self, title: str) -> dict[str, Any] | None:
        """The session titled exactly ``title`` (case-sensitive), or ``None``."""
        return self._query(lambda db: sessions.row_by_title(db, title))

    def resolve_session_by_title(self, title: str) -> str | None:
        """The latest ``"<title> #N"`` session if any exists, else the exact match's id."""
        return self._query(lambda db: sessions.resolve_title(db, title), snapshot=True)

    def get_next_title_in_lineage(self, base_title: str) -> str:
        """The next free numbered title: ``"my project"`` → ``"my project #2"``."""
        return self._query(lambda db: sessions.next_title_in_lineage(db, base_title))

    # --- lineage ---------------------------------------------------------------------

    def get_compression_tip(self, session_id: str) -> str:
        """The live end of the conversation ``session_id`` belongs to, or the input.

        Each step goes from a session that ended by compression to its best child, leaving
        out branches, delegates and tool runs: one that itself ended by compression, else
        a live one, else any; then the most recently active, latest started, greatest id.
        A session seen before ends the walk, as do 100 steps.
        """
        return self._query(lambda db: lineage.compression_tip(db, session_id))

    def resolve_resume_session_id(self, session_id: str) -> str:
        """The session to resume: from the compression tip, the deepest session holding
        messages down the line of latest-started children (no branches, delegates or tool
        runs; at most 32), else the tip. A falsy input, or a failing read, returns the
        input."""
        if not session_id:
            return session_id
        try:
            return self._query(lambda db: lineage.resume_target(db, session_id), snapshot=True)
        except (StoreError, sa_exc.SQLAlchemyError) as exc:
            # Upstream returns the input whenever a query fails; reads raise the store's
            # own errors (CorruptDatabase …), SQLAlchemy's only for what has no translation.
            log.debug("resolve_resume_session_id fell back to the input: %s", exc)
            return session_id

    def _session_lineage_root_to_tip(self, session_id: str) -> list[str]:
        return self._query(lambda db: lineage.chain_root_to_session(db, session_id))

    def get_ancestors(self, session_id: str) -> list[lineage.LineageNode]:
        """The session and its ancestors, root first."""
        return self._query(lambda db: lineage.ancestors(db, session_id))

    def get_descendants(self, session_id: str) -> list[lineage.LineageNode]:
        """The session and all its descendants, breadth first."""
        return self._query(lambda db: lineage.descendants(db, session_id))

    # --- messages --------------------------------------------------------------------

    def append_message(
        self,
        session_id: str,
        role: str,
        content: Any = None,
        tool_name: str | None = None,
        tool_calls: Any = None,
        tool_call_id: str | None = None,
        token_count: int | None = None,
        finish_reason: str | None = None,
        reasoning: str | None = None,
        reasoning_content: str | None = None,
        reasoning_details: Any = None,
        codex_reasoning_items: Any = None,
        codex_message_items: Any = None,
        platform_message_id: str | None = None,
        observed: bool = False,
        timestamp: Any = None,
    ) -> int:
        """Store one message and bump the session's counters; returns the message id.

        ``tool_calls`` adds its length (a list) or 1 (any other value) to
        ``tool_call_count``. ``platform_message_id`` is the chat platform's own id for the
        message (a number is stored as its text); ``observed`` marks a group message the
        agent saw without being addressed. ``timestamp`` (a ``datetime`` or epoch
        seconds) replaces the current time; a value that is no time is ignored. An
        unknown session raises ``sqlite3.IntegrityError``; a wrongly typed argument
        raises ``TypeError`` before anything is written.
        """
        # What _append_plan does, written out: the sync face's hot path, where passing
        # the fifteen fields on through *args costs about 3,000 CPU instructions.
        if not isinstance(session_id, str):
            require_str("session_id", session_id)
        message = self._new_message(
            role,
            content,
            tool_name,
            tool_calls,
            tool_call_id,
            token_count,
            finish_reason,
            reasoning,
            reasoning_content,
            reasoning_details,
            codex_reasoning_items,
            codex_message_items,
            platform_message_id,
            observed,
            timestamp,
        )
        return self._write(lambda db: messages.append(db, session_id, message), "appending a message")

    def _append_plan(self, session_id: str, *fields: Any) -> WritePlan:
        """The write :meth:`append_message` makes, every argument checked and encoded first
        (``fields``: its arguments after ``session_id``, in order); shared by both faces."""
        require_str("session_id", session_id)
        message = self._new_message(*fields)
        return (lambda db: messages.append(db, session_id, message)), "appending a message"

    def _append_many_plan(self, session_id: str, messages_: Sequence[dict[str, Any]]) -> WritePlan | None:
        """The write that stores a turn's messages (``None``: there are none), each entry
        checked and encoded first, so that a bad one raises before anything is written."""
        require_str("session_id", session_id)
        prepared = []
        for entry in messages_:
            if not isinstance(entry, dict):
                raise TypeError(f"each message must be a dict, not {type(entry).__name__}")
            prepared.append(self._new_message(**entry))
        if not prepared:
            return None
        return (lambda db: messages.append_many(db, session_id, prepared)), "appending messages"

    def append_messages(self, session_id: str, messages_: Sequence[dict[str, Any]]) -> list[int]:
        """Store a turn's messages in one transaction; returns their ids, in order.

        Each entry is a dict of :meth:`append_message`'s keyword arguments (``role``
        required). Rows, validation and counters are those of one :meth:`append_message`
        per entry, but all are written or none: a wrongly typed entry raises
        ``TypeError`` and an unknown session ``sqlite3.IntegrityError``, writing nothing.
        """
        plan = self._append_many_plan(session_id, messages_)
        return [] if plan is None else self._write(*plan)

    def _new_message(
        self,
        role: str,
        content: Any = None,
        tool_name: str | None = None,
        tool_calls: Any = None,
        tool_call_id: str | None = None,
        token_count: int | None = None,
        finish_reason: str | None = None,
        reasoning: str | None = None,
        reasoning_content: str | None = None,
        reasoning_details: Any = None,
        codex_reasoning_items: Any = None,
        codex_message_items: Any = None,
        platform_message_id: Any = None,
        observed: object = False,
        timestamp: Any = None,
    ) -> messages.NewMessage:
        """``append_message``'s arguments checked and encoded (``TypeError`` if mistyped)."""
        # Per append, so one expression for the common case (role a str, each other text
        # field None or a str); the checks that name the culprit (or turn a numeric
        # platform id into text) run only when it fails.
        if not (
            isinstance(role, str)
            and (tool_name is None or isinstance(tool_name, str))
            and (tool_call_id is None or isinstance(tool_call_id, str))
            and (finish_reason is None or isinstance(finish_reason, str))
            and (reasoning is None or isinstance(reasoning, str))
            and (reasoning_content is None or isinstance(reasoning_content, str))
            and (platform_message_id is None or isinstance(platform_message_id, str))
        ):
            require_str("role", role)
            optional_str("tool_name", tool_name)
            optional_str("tool_call_id", tool_call_id)
            optional_str("finish_reason", finish_reason)
            optional_str("reasoning", reasoning)
            optional_str("reasoning_content", reasoning_content)
            platform_message_id = codec.platform_message_text("platform_message_id", platform_message_id)
        if timestamp is not None:
            timestamp = codec.explicit_timestamp(timestamp)
        if token_count is not None:
            optional_int("token_count", token_count)
        return conversation.new_message(
            role,
            content,
            tool_name,
            tool_calls,
            tool_call_id,
            token_count,
            finish_reason,
            reasoning,
            reasoning_content,
            reasoning_details,
            codex_reasoning_items,
            codex_message_items,
            platform_message_id,
            observed,
            timestamp,
            self._encode_content,
        )

    def replace_messages(
        self,
        session_id: str,
        messages: Sequence[dict[str, Any]],  # upstream's name: callers pass it by keyword
        active_only: bool = False,
    ) -> None:
        """Atomically replace a session's transcript with ``messages`` (OpenAI-style dicts).

        By default every stored row of the session goes, archived and rewound history
        included; ``active_only=True`` replaces only the live rows and keeps that history.
        A dict's ``timestamp`` is kept, the others get increasing times from now. The
        session's counters become those of ``messages``.
        """
        require_str("session_id", session_id)
        prepared = conversation.messages_from_dicts(messages, self._encode_content)
        self._replace_prepared(session_id, prepared, bool(active_only))

    def _replace_prepared(self, session_id: str, prepared: Sequence[Any], active_only: bool) -> None:
        # Apart from replace_messages, where a parameter named as upstream's hides the
        # messages repository.
        self._write(
            lambda db: messages.replace_all(db, session_id, prepared, active_only=active_only),
            "replacing messages",
        )

    def get_messages(self, session_id: str, include_inactive: bool = False) -> list[dict[str, Any]]:
        """A session's live messages (every message with ``include_inactive``: rewound
        and archived ones too) with all 19 columns, in insertion order.

        ``content`` and ``tool_calls`` are decoded; the other JSON columns stay strings.
        """
        return conversation.decoded(
            self._query(lambda db: messages.rows_for(db, session_id, bool(include_inactive)))
        )

    def get_messages_as_conversation(
        self, session_id: str, include_ancestors: bool = False, include_inactive: bool = False
    ) -> list[dict[str, Any]]:
        """The session's live messages (all, with ``include_inactive``) as OpenAI-format
        messages for replay, in insertion order.

        User/assistant text has recalled-memory blocks removed and is trimmed. Each
        message carries its ``timestamp``, and ``message_id`` (the platform's id) and
        ``observed: True`` when set. Background-review prompts that older upstream builds
        stored in the session are left out, with the assistant reply right after each.
        With ``include_ancestors`` the whole parent chain is replayed, root first, without
        the user prompts that were re-sent on resume.
        """
        return self._query(
            lambda db: conversation.replay(db, session_id, include_ancestors, bool(include_inactive)),
            snapshot=True,
        )

    def clear_messages(self, session_id: str) -> None:
        """Delete all of a session's messages (archived and rewound ones too) and zero its
        message counters (the session stays)."""
        self._write(lambda db: messages.clear(db, session_id), "clearing messages")

    # --- listing, counting, export ---------------------------------------------------

    def list_sessions_rich(
        self,
        source: str | None = None,
        exclude_sources: Sequence[str] | None = None,
        cwd_prefix: str | None = None,
        limit: int = 20,
        offset: int = 0,
        include_children: bool = False,
        min_message_count: int = 0,
        project_compression_tips: bool = True,
        order_by_last_active: bool = False,
        include_archived: bool = False,
        archived_only: bool = False,
        id_query: str | None = None,
        search_query: str | None = None,
    ) -> list[dict[str, Any]]:
        """Sessions with ``preview`` and ``last_active``, latest started first.

        Only roots and branches are listed unless ``include_children``; sessions tagged as
        delegates never are. Archived sessions are left out (``include_archived``: listed
        too; ``archived_only``: only they). ``cwd_prefix`` keeps sessions whose working
        directory is that folder or below it; ``min_message_count`` those with at least
        that many live messages. A session split by compression is shown with its latest
        continuation's details (and ``_lineage_root_id``) unless
        ``project_compression_tips`` is false. ``order_by_last_active`` orders by the
        latest activity anywhere in each conversation, and only then do ``id_query`` (part
        of a session id) and ``search_query`` (part of a title or id; ``an94`` finds
        ``AN-94``) filter, matching any session of the conversation.
        """
        require_count("limit", limit)
        require_count("offset", offset)
        require_count("min_message_count", min_message_count)
        optional_str("cwd_prefix", cwd_prefix)
        optional_str("id_query", id_query)
        optional_str("search_query", search_query)
        filters = listing.ListingFilter(
            source,
            exclude_sources,
            include_children,
            cwd_prefix=cwd_prefix,
            min_message_count=min_message_count,
            include_archived=include_archived,
            archived_only=archived_only,
            hide_hidden=True,
        )
        match = listing.ChainMatch(id_query or "", search_query or "")
        return self._query(
            lambda db: listing.rich_listing(
                db,
                filters,
                limit,
                offset,
                order_by_last_active=order_by_last_active,
                project_compression_tips=project_compression_tips and not include_children,
                match=match,
            )
        )

    def search_sessions(
        self, source: str | None = None, limit: int = 20, offset: int = 0
    ) -> list[dict[str, Any]]:
        """Sessions with ``last_active``, most recently active first."""
        require_count("limit", limit)
        require_count("offset", offset)
        return self._query(lambda db: listing.by_last_active(db, source, limit, offset))

    def session_count(
        self,
        source: str | None = None,
        cwd_prefix: str | None = None,
        min_message_count: int = 0,
        include_archived: bool = False,
        archived_only: bool = False,
        exclude_children: bool = False,
        exclude_sources: Sequence[str] | None = None,
    ) -> int:
        """Number of sessions, archived ones left out unless ``include_archived`` (or
        ``archived_only``: only they). The filters are :meth:`list_sessions_rich`'s;
        ``exclude_children`` counts only the sessions it lists by default (roots and
        branches, no delegates), so that a count matches its pages.
        """
        require_count("min_message_count", min_message_count)
        optional_str("cwd_prefix", cwd_prefix)
        filters = listing.ListingFilter(
            source,
            exclude_sources,
            include_children=not exclude_children,
            cwd_prefix=cwd_prefix,
            min_message_count=min_message_count,
            include_archived=include_archived,
            archived_only=archived_only,
        )
        return self._query(lambda db: listing.count(db, filters))

    def message_count(self, session_id: str | None = None) -> int:
        """Number of stored messages (of one session when given), inactive ones included."""
        return self._query(lambda db: messages.count(db, session_id))

    def export_session(self, session_id: str) -> dict[str, Any] | None:
        """A session's row plus ``"messages"`` (its live ones, as :meth:`get_messages`), or ``None``.

        Row and messages come from one read transaction, so they always agree.
        """
        return self._query(lambda db: conversation.exported_session(db, session_id), snapshot=True)

    def export_all(self, source: str | None = None) -> list[dict[str, Any]]:
        """Every session (most recently active first) with its live ``"messages"``, one snapshot."""
        return self._query(lambda db: conversation.exported_all(db, source), snapshot=True)

    def delete_session(self, session_id: str, sessions_dir: str | os.PathLike[str] | None = None) -> bool:
        """Delete a session and its messages; ``False`` if there is no such session.

        Its delegate sub-agents (sessions tagged ``_delegate_from`` with its id, or its
        children carrying any such tag, and theirs in turn) are deleted with it, in the
        same transaction; its other children (branches, compression continuations) are
        detached and kept. With ``sessions_dir``, the transcript files of every deleted
        session are removed too.
        """
        removed = self._write(lambda db: sessions.delete_one(db, session_id), "deleting a session")
        remove_transcripts(sessions_dir, removed)
        return bool(removed)

    def prune_sessions(
        self,
        older_than_days: float = 90,
        source: str | None = None,
        sessions_dir: str | os.PathLike[str] | None = None,
        *,
        progress: ProgressFn | None = None,
    ) -> int:
        """Delete ended sessions started more than ``older_than_days`` ago; returns how many.

        Live sessions are never pruned; archived ones are. Children of pruned sessions,
        delegate sub-agents included, are detached. Runs in short batches (at most
        :data:`~hermes_store.repository.sessions.MESSAGES_PER_BATCH` messages), each its
        own transaction with a pause after it, so that agents writing meanwhile wait
        milliseconds, never the whole prune; each session goes whole with its messages,
        so a prune that is interrupted leaves only whole sessions and is finished by
        running it again. ``progress`` (a :data:`~hermes_store.domain.progress.ProgressFn`)
        is told ``("pruning sessions", done, total)`` after each batch.
        """
        cutoff = time.time() - require_finite("older_than_days", older_than_days, "days") * 86400
        report: Callable[[int], None] | None = None
        if progress is not None:
            total, _messages = self._query(lambda db: sessions.count_prunable(db, cutoff, source))
            progress("pruning sessions", 0, total)

            def report(done: int) -> None:
                progress("pruning sessions", done, max(done, total))

        budget = TimedBudget(high=sessions.MESSAGES_PER_BATCH)
        pruned = sweep_in_batches(
            self,
            lambda db: sessions.prune_batch(db, cutoff, source, budget.size),
            "pruning sessions",
            sessions_dir,
            report,
            budget,
        )
        return len(pruned)

    # --- search ----------------------------------------------------------------------

    def search_messages(
        self,
        query: str,
        source_filter: Sequence[str] | None = None,
        exclude_sources: Sequence[str] | None = None,
        role_filter: Sequence[str] | None = None,
        limit: int = 20,
        offset: int = 0,
        sort: str | None = None,
        include_inactive: bool = False,
    ) -> list[dict[str, Any]]:
        """Full-text search over messages (content, tool name, tool-call JSON).

        Words go to the word index, CJK to the trigram index or a literal substring scan.
        Each hit has ``id, session_id, role, snippet, timestamp, tool_name, source, model,
        session_started, context``. Never raises on query syntax.

        ``sort="newest"``/``"oldest"`` (any case, surrounding spaces ignored) orders the
        hits by message time, relevance breaking ties; any other value keeps relevance
        order. Messages taken back by a rewind are not hits unless ``include_inactive``;
        messages archived by compaction are.
        """
        if not query:
            return []
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, not {type(query).__name__}")
        require_count("limit", limit)
        require_count("offset", offset)
        plan = plan_search(query)
        if plan.kind == "empty":
            return []
        order = search_order(sort)
        filters = SearchFilters(source_filter, exclude_sources, role_filter, bool(include_inactive))
        return self._query(lambda db: search(db, plan, filters, limit, offset, order))

    # --- metadata and maintenance ----------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """The value stored under ``key`` in ``state_meta``."""
        require_str("key", key)
        return self._query(lambda db: meta.get(db, key))

    def set_meta(self, key: str, value: str | None) -> None:
        """Store ``value`` under ``key`` in ``state_meta``."""
        require_str("key", key)
        optional_str("value", value)
        self._write(lambda db: meta.put(db, key, value), "setting metadata")

    def maybe_auto_prune_and_vacuum(
        self,
        retention_days: float = 90,
        min_interval_hours: float = 24,
        vacuum: bool = True,
        sessions_dir: str | os.PathLike[str] | None = None,
    ) -> dict[str, Any]:
        """Prune and vacuum at most once per ``min_interval_hours``; never raises.

        Returns ``{"skipped", "pruned", "vacuumed"}`` plus ``"error"`` on failure.
        """
        return maintenance.auto_prune_and_vacuum(
            self, retention_days, min_interval_hours, vacuum=vacuum, sessions_dir=sessions_dir
        )

    def close(self) -> None:
        """Checkpoint the WAL and close every connection; calling it twice is harmless."""
        if self._closed:
            return
        with self._uow._lock:
            if self._raw is not None:
                _restore_pooled_driver(self._raw.driver_connection)
                self._raw.close()
                self._raw = None
        self._uow.close()
        if self._standby_reads is not None:
            self._standby_reads.dispose()
        self._release_engine(owned=False)
        self._closed = True

    @property
    def standby_reads_served(self) -> dict[str, int]:
        """How many reads each standby of ``read_urls`` and the primary served (``{}``
        without standbys): a figure, not a call to the database."""
        return {} if self._standby_reads is None else self._standby_reads.served()

    def _release_engine(self, *, owned: bool) -> None:
        """Close the in-memory database's anchor, and dispose of the engine if ``owned``."""
        anchor, self._memory_anchor = self._memory_anchor, None
        if anchor is not None:
            anchor.detach()  # out of the pool, so that close() really closes it
            anchor.close()
        if owned:
            self.engine.dispose()

    def __enter__(self) -> SessionDB:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
