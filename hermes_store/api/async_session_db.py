"""``AsyncSessionDB``: every ``SessionDB`` method as a coroutine, for asyncio services.

Each method runs the sync facade's own code — validation, repositories, SQL, search —
in a greenlet on an :class:`~sqlalchemy.ext.asyncio.AsyncEngine` (see
:mod:`hermes_store.uow.async_bridge`), through :class:`~hermes_store.aio.AsyncUnitOfWork`.
So arguments, defaults, results and errors are the sync store's by construction; only
the waiting differs: lock waits, busy timeouts and retry pauses never block the loop.

Cancellation: a call runs to completion in a task of its own. Cancelling the awaiting
task raises ``CancelledError`` in it at once, but a write already started is either
committed whole or rolled back whole on its own error — never stopped half-way — and
:meth:`AsyncSessionDB.close` waits for it.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from hermes_store.api.session_db import SessionDB, WritePlan, raise_for_caller
from hermes_store.db.async_engine import create_async_engine
from hermes_store.db.engine import adopt_engine, parse_url, sqlite_path
from hermes_store.db.memory import names_memory
from hermes_store.domain.progress import ProgressFn
from hermes_store.errors import StoreClosed
from hermes_store.repository import lineage
from hermes_store.uow.async_bridge import run_in_greenlet
from hermes_store.uow.async_unit_of_work import AsyncUnitOfWork

T = TypeVar("T")
# ":memory:": aiosqlite's in-memory database, reached through the engine's one connection.
_IN_MEMORY = "sqlite+aiosqlite://"


class AsyncSessionDB:
    """Hermes' session store for asyncio: ``await db.append_message(...)`` and so on.

    ``AsyncSessionDB()`` opens the default store; ``db_path`` may be a ``str`` or
    ``Path`` or a SQLAlchemy URL (``sqlite+aiosqlite:///…``, ``postgresql+psycopg://…``,
    ``postgresql+asyncpg://…``; sync driver names are mapped to asyncio ones), ``url=``
    says the same explicitly, and ``engine=`` injects an ``AsyncEngine``. Other keyword
    arguments are ``SessionDB``'s server options (``pool_size``, ``statement_timeout``,
    ``lock_timeout``, …, and ``profile``; docs/postgresql.md), also accepted in the URL's query. The schema is
    checked on first use (or ``async with``) as :class:`SessionDB` does: a SQLite file is
    created or upgraded, a server database only created when empty (``auto_upgrade=True``
    upgrades one behind head too). One instance belongs to one
    event loop; several processes and loops may share one SQLite file.
    """

    MAX_TITLE_LENGTH: ClassVar[int] = SessionDB.MAX_TITLE_LENGTH
    # Pure helpers: no I/O, so they stay plain functions, as on SessionDB.
    sanitize_title = staticmethod(SessionDB.sanitize_title)
    _sanitize_fts5_query = staticmethod(SessionDB._sanitize_fts5_query)

    def __init__(
        self,
        db_path: str | os.PathLike[str] | None = None,
        *,
        url: str | URL | None = None,
        engine: AsyncEngine | None = None,
        auto_upgrade: bool = False,
        **engine_options: Any,
    ) -> None:
        # A url= that is not a URL is a mistake, never a file name (as for SessionDB).
        target: str | os.PathLike[str] | URL | None = parse_url(url) if url is not None else (db_path or None)
        if engine is None and names_memory(target):
            target = _IN_MEMORY  # aiosqlite's in-memory store, never a file named ":memory:"
        if engine is not None:
            # A caller's engine gets our connection settings but stays the caller's:
            # close() leaves its pool alone (as SessionDB does).
            adopt_engine(engine.sync_engine)
        # engine_options: SessionDB's pool and timeout settings for a server (docs/postgresql.md).
        self.engine = engine if engine is not None else create_async_engine(target, **engine_options)
        self.db_path = sqlite_path(self.engine.url)
        self.unit_of_work = AsyncUnitOfWork(self.engine, owns_engine=engine is None)
        self._store: SessionDB | None = None
        self._opening = asyncio.Lock()
        self._auto_upgrade = auto_upgrade
        self._closed = False

    async def open(self) -> AsyncSessionDB:
        """Check (create, or upgrade where allowed) the schema now instead of on first use;
        returns ``self``."""
        await self._facade()
        return self

    async def _facade(self) -> SessionDB:
        if self._closed:
            raise StoreClosed()
        if self._store is None:
            async with self._opening:
                if self._store is None:
                    self._store = self._rebind(await self._bridge_facade())
        return self._store

    async def _bridge_facade(self) -> SessionDB:
        if self.unit_of_work.runs_on_threads:
            # SQLite: the sync store itself, opened (and migrated) on a worker thread.
            return await self.unit_of_work.run(
                SessionDB, engine=self.unit_of_work.sync_engine, auto_upgrade=self._auto_upgrade
            )
        # A server database is opened through the store's own engine, so the same connect
        # arguments, server options and pool serve it (an injected engine's included); its
        # waits are the async driver's, on the loop.
        return await run_in_greenlet(
            SessionDB, engine=self.engine.sync_engine, auto_upgrade=self._auto_upgrade
        )

    def _rebind(self, store: SessionDB) -> SessionDB:
        if store.engine is not self.unit_of_work.sync_engine:
            store.engine.dispose()
            store.engine = self.unit_of_work.sync_engine
        store._uow = self.unit_of_work.sync
        return store

    @property
    def sync_engine(self) -> sa.Engine:
        """The sync engine this store's statements run on: attach event listeners and
        instrumentation here (on SQLite every call runs on worker threads with a sync
        engine of its own; on PostgreSQL this is ``engine.sync_engine``)."""
        return self.unit_of_work.sync_engine

    async def _call(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        store = await self._facade()
        return await self.unit_of_work.run(method, store, *args, **kwargs)

    async def _read_call(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        # Reads have worker threads of their own (AsyncUnitOfWork.run_read).
        store = await self._facade()
        return await self.unit_of_work.run_read(method, store, *args, **kwargs)

    async def close(self) -> None:
        """Wait for calls in flight, checkpoint the WAL, close every connection; idempotent."""
        if self._closed:
            return
        self._closed = True
        async with self._opening:
            store, self._store = self._store, None
        await self.unit_of_work.drain()
        # The store's close() closes the unit of work it runs on (never opened: close that).
        await self.unit_of_work.run(store.close if store is not None else self.unit_of_work.sync.close)
        await self.unit_of_work.release()

    async def __aenter__(self) -> AsyncSessionDB:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def append_message(
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
        """Awaitable :meth:`SessionDB.append_message`; on SQLite the appends of concurrent
        tasks share one transaction (docs/async.md)."""
        store = await self._facade()
        plan = store._append_plan(
            session_id,
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
        return await self._write_planned(plan)  # type: ignore[no-any-return]

    async def append_messages(self, session_id: str, messages_: Sequence[dict[str, Any]]) -> list[int]:
        """Awaitable :meth:`SessionDB.append_messages`."""
        store = await self._facade()
        plan = store._append_many_plan(session_id, messages_)
        return [] if plan is None else await self._write_planned(plan)

    async def _write_planned(self, plan: WritePlan) -> Any:
        """Run a write the sync store prepared (checked, encoded) here on the loop."""
        try:
            return await self.unit_of_work.write_batched(*plan)
        except sa_exc.StatementError as exc:
            raise_for_caller(exc)

    async def clear_messages(self, session_id: str) -> None:
        """Awaitable :meth:`SessionDB.clear_messages`."""
        return await self._call(SessionDB.clear_messages, session_id)

    async def create_session(self, session_id: str, source: str, **kwargs: Any) -> str:
        """Awaitable :meth:`SessionDB.create_session`."""
        return await self._call(SessionDB.create_session, session_id, source, **kwargs)

    async def delete_session(
        self, session_id: str, sessions_dir: str | os.PathLike[str] | None = None
    ) -> bool:
        """Awaitable :meth:`SessionDB.delete_session`."""
        return await self._call(SessionDB.delete_session, session_id, sessions_dir)

    async def end_session(self, session_id: str, end_reason: str) -> None:
        """Awaitable :meth:`SessionDB.end_session`."""
        return await self._call(SessionDB.end_session, session_id, end_reason)

    async def ensure_session(
        self, session_id: str, source: str = "unknown", model: str | None = None, **kwargs: Any
    ) -> str:
        """Awaitable :meth:`SessionDB.ensure_session`."""
        return await self._call(SessionDB.ensure_session, session_id, source, model, **kwargs)

    async def export_all(self, source: str | None = None) -> list[dict[str, Any]]:
        """Awaitable :meth:`SessionDB.export_all`."""
        return await self._read_call(SessionDB.export_all, source)

    async def export_session(self, session_id: str) -> dict[str, Any] | None:
        """Awaitable :meth:`SessionDB.export_session`."""
        return await self._read_call(SessionDB.export_session, session_id)

    async def get_ancestors(self, session_id: str) -> list[lineage.LineageNode]:
        """Awaitable :meth:`SessionDB.get_ancestors`."""
        return await self._read_call(SessionDB.get_ancestors, session_id)

    async def get_compression_tip(self, session_id: str) -> str:
        """Awaitable :meth:`SessionDB.get_compression_tip`."""
        return await self._read_call(SessionDB.get_compression_tip, session_id)

    async def get_descendants(self, session_id: str) -> list[lineage.LineageNode]:
        """Awaitable :meth:`SessionDB.get_descendants`."""
        return await self._read_call(SessionDB.get_descendants, session_id)

    async def get_messages(self, session_id: str, include_inactive: bool = False) -> list[dict[str, Any]]:
        """Awaitable :meth:`SessionDB.get_messages`."""
        return await self._read_call(SessionDB.get_messages, session_id, include_inactive)

    async def get_messages_as_conversation(
        self, session_id: str, include_ancestors: bool = False, include_inactive: bool = False
    ) -> list[dict[str, Any]]:
        """Awaitable :meth:`SessionDB.get_messages_as_conversation`."""
        return await self._read_call(
            SessionDB.get_messages_as_conversation, session_id, include_ancestors, include_inactive
        )

    async def get_meta(self, key: str) -> str | None:
        """Awaitable :meth:`SessionDB.get_meta`."""
        return await self._read_call(SessionDB.get_meta, key)

    async def get_next_title_in_lineage(self, base_title: str) -> str:
        """Awaitable :meth:`SessionDB.get_next_title_in_lineage`."""
        return await self._read_call(SessionDB.get_next_title_in_lineage, base_title)

    async def get_session(self, session_id: str) -> dict[str, Any] | None:
        """Awaitable :meth:`SessionDB.get_session`."""
        return await self._read_call(SessionDB.get_session, session_id)

    async def get_session_by_title(self, title: str) -> dict[str, Any] | None:
        """Awaitable :meth:`SessionDB.get_session_by_title`."""
        return await self._read_call(SessionDB.get_session_by_title, title)

    async def get_session_title(self, session_id: str) -> str | None:
        """Awaitable :meth:`SessionDB.get_session_title`."""
        return await self._read_call(SessionDB.get_session_title, session_id)

    async def list_sessions_rich(
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
        """Awaitable :meth:`SessionDB.list_sessions_rich`."""
        return await self._read_call(
            SessionDB.list_sessions_rich,
            source,
            exclude_sources,
            cwd_prefix,
            limit,
            offset,
            include_children,
            min_message_count,
            project_compression_tips,
            order_by_last_active,
            include_archived,
            archived_only,
            id_query,
            search_query,
        )

    async def maybe_auto_prune_and_vacuum(
        self,
        retention_days: float = 90,
        min_interval_hours: float = 24,
        vacuum: bool = True,
        sessions_dir: str | os.PathLike[str] | None = None,
    ) -> dict[str, Any]:
        """Awaitable :meth:`SessionDB.maybe_auto_prune_and_vacuum`."""
        return await self._call(
            SessionDB.maybe_auto_prune_and_vacuum, retention_days, min_interval_hours, vacuum, sessions_dir
        )

    async def message_count(self, session_id: str | None = None) -> int:
        """Awaitable :meth:`SessionDB.message_count`."""
        return await self._read_call(SessionDB.message_count, session_id)

    async def prune_empty_ghost_sessions(self, sessions_dir: str | os.PathLike[str] | None = None) -> int:
        """Awaitable :meth:`SessionDB.prune_empty_ghost_sessions`."""
        return await self._call(SessionDB.prune_empty_ghost_sessions, sessions_dir)

    async def prune_sessions(
        self,
        older_than_days: float = 90,
        source: str | None = None,
        sessions_dir: str | os.PathLike[str] | None = None,
        *,
        progress: ProgressFn | None = None,
    ) -> int:
        """Awaitable :meth:`SessionDB.prune_sessions`."""
        return await self._call(
            SessionDB.prune_sessions, older_than_days, source, sessions_dir, progress=progress
        )

    async def reopen_session(self, session_id: str) -> None:
        """Awaitable :meth:`SessionDB.reopen_session`."""
        return await self._call(SessionDB.reopen_session, session_id)

    async def replace_messages(
        self, session_id: str, messages: Sequence[dict[str, Any]], active_only: bool = False
    ) -> None:
        """Awaitable :meth:`SessionDB.replace_messages`."""
        return await self._call(SessionDB.replace_messages, session_id, messages, active_only)

    async def resolve_resume_session_id(self, session_id: str) -> str:
        """Awaitable :meth:`SessionDB.resolve_resume_session_id`."""
        return await self._read_call(SessionDB.resolve_resume_session_id, session_id)

    async def resolve_session_by_title(self, title: str) -> str | None:
        """Awaitable :meth:`SessionDB.resolve_session_by_title`."""
        return await self._read_call(SessionDB.resolve_session_by_title, title)

    async def resolve_session_id(self, session_id_or_prefix: str) -> str | None:
        """Awaitable :meth:`SessionDB.resolve_session_id`."""
        return await self._read_call(SessionDB.resolve_session_id, session_id_or_prefix)

    async def search_messages(
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
        """Awaitable :meth:`SessionDB.search_messages`."""
        return await self._read_call(
            SessionDB.search_messages,
            query,
            source_filter,
            exclude_sources,
            role_filter,
            limit,
            offset,
            sort,
            include_inactive,
        )

    async def search_sessions(
        self, source: str | None = None, limit: int = 20, offset: int = 0
    ) -> list[dict[str, Any]]:
        """Awaitable :meth:`SessionDB.search_sessions`."""
        return await self._read_call(SessionDB.search_sessions, source, limit, offset)

    async def session_count(
        self,
        source: str | None = None,
        cwd_prefix: str | None = None,
        min_message_count: int = 0,
        include_archived: bool = False,
        archived_only: bool = False,
        exclude_children: bool = False,
        exclude_sources: Sequence[str] | None = None,
    ) -> int:
        """Awaitable :meth:`SessionDB.session_count`."""
        return await self._read_call(
            SessionDB.session_count,
            source,
            cwd_prefix,
            min_message_count,
            include_archived,
            archived_only,
            exclude_children,
            exclude_sources,
        )

    async def set_meta(self, key: str, value: str | None) -> None:
        """Awaitable :meth:`SessionDB.set_meta`."""
        return await self._call(SessionDB.set_meta, key, value)

    async def set_session_title(self, session_id: str, title: str | None) -> bool:
        """Awaitable :meth:`SessionDB.set_session_title`."""
        return await self._call(SessionDB.set_session_title, session_id, title)

    async def update_system_prompt(self, session_id: str, system_prompt: str) -> None:
        """Awaitable :meth:`SessionDB.update_system_prompt`."""
        return await self._call(SessionDB.update_system_prompt, session_id, system_prompt)

    async def update_token_counts(
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
        """Awaitable :meth:`SessionDB.update_token_counts`."""
        return await self._call(
            SessionDB.update_token_counts,
            session_id,
            input_tokens,
            output_tokens,
            model,
            cache_read_tokens,
            cache_write_tokens,
            reasoning_tokens,
            estimated_cost_usd,
            actual_cost_usd,
            cost_status,
            cost_source,
            pricing_version,
            billing_provider,
            billing_base_url,
            billing_mode,
            api_call_count,
            absolute,
        )


def _forwarding_coroutine(name: str, *, read: bool) -> Callable[..., Any]:
    """A coroutine method that runs ``SessionDB.<name>`` on a read (or write) worker."""
    method = getattr(SessionDB, name)

    async def forward(self: AsyncSessionDB, *args: Any, **kwargs: Any) -> Any:
        call = self._read_call if read else self._call
        return await call(method, *args, **kwargs)

    forward.__name__ = name
    forward.__qualname__ = f"AsyncSessionDB.{name}"
    forward.__doc__ = f"Awaitable :meth:`SessionDB.{name}`."
    forward.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    return forward


def _add_feature_coroutines() -> None:
    """Give ``AsyncSessionDB`` a coroutine for every method the feature mixins name."""
    for mixin in SessionDB.__mro__:
        for name in vars(mixin).get("_ASYNC_READS", ()):
            setattr(AsyncSessionDB, name, _forwarding_coroutine(name, read=True))
        for name in vars(mixin).get("_ASYNC_WRITES", ()):
            setattr(AsyncSessionDB, name, _forwarding_coroutine(name, read=False))


_add_feature_coroutines()
