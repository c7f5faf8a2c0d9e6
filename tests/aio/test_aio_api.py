"""``AsyncSessionDB``'s shape and its write contract on SQLite.

Behaviour method by method is the SessionDB behavioural suite's job (it runs against
both APIs); this module checks what is specific to the async store: the same signatures
as coroutines, opening and closing, the connection policy of the asyncio engine (WAL or
the DELETE fallback, busy timeout, foreign keys, 0600 files, checkpoint on close), and
the retry budget and ``WriteConflict`` of the async unit of work.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import stat
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from aio_support import Processes
from sqlalchemy import event, orm, text
from sqlalchemy.engine import Connection

from hermes_store import SessionDB
from hermes_store.aio import AsyncSessionDB, AsyncUnitOfWork, create_async_engine
from hermes_store.db.engine import JournalModeWarning
from hermes_store.errors import NestedWrite, WriteConflict
from hermes_store.repository import meta


def _public_methods(cls: type) -> dict[str, object]:
    return {
        name: member
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and name != "sanitize_title"
    }


def test_every_sessiondb_method_is_a_coroutine_with_the_same_signature() -> None:
    sync_methods = _public_methods(SessionDB)
    async_methods = _public_methods(AsyncSessionDB)
    assert set(sync_methods) <= set(async_methods)
    assert set(async_methods) - set(sync_methods) == {"open"}
    for name, method in sync_methods.items():
        counterpart = async_methods[name]
        assert inspect.iscoroutinefunction(counterpart), name
        assert inspect.signature(counterpart) == inspect.signature(method), name  # type: ignore[arg-type]
    assert AsyncSessionDB.MAX_TITLE_LENGTH == SessionDB.MAX_TITLE_LENGTH
    assert AsyncSessionDB.sanitize_title("  a  title ") == SessionDB.sanitize_title("  a  title ")


def test_open_close_and_async_with(tmp_path: Path) -> None:
    async def scenario() -> None:
        db = AsyncSessionDB(tmp_path / "state.db")
        assert db.db_path == tmp_path / "state.db"
        await db.create_session("lazy", "cli")  # the first call opens the store
        await db.close()
        await db.close()  # harmless twice
        with pytest.raises(RuntimeError, match="closed"):
            await db.get_session("lazy")
        async with AsyncSessionDB(url=f"sqlite+aiosqlite:///{tmp_path / 'state.db'}") as again:
            assert (await again.get_session("lazy"))["source"] == "cli"

    asyncio.run(scenario())


def test_files_are_owner_only_and_the_wal_is_checkpointed_on_close(tmp_path: Path) -> None:
    path = tmp_path / "new" / "state.db"

    async def scenario() -> None:
        async with AsyncSessionDB(path) as db:
            await db.create_session("s", "cli")
            await db.append_message("s", "user", "private")
            for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                assert stat.S_IMODE(file.stat().st_mode) == 0o600, file

    previous = os.umask(0o022)
    try:
        asyncio.run(scenario())
    finally:
        os.umask(previous)
    assert not Path(f"{path}-wal").exists()
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_the_asyncio_engine_sets_wal_busy_timeout_and_foreign_keys(store_path: Path) -> None:
    async def scenario() -> tuple[object, ...]:
        engine = create_async_engine(store_path)
        try:
            async with engine.connect() as connection:
                pragmas = ("journal_mode", "busy_timeout", "foreign_keys", "recursive_triggers")
                return tuple([(await connection.exec_driver_sql(f"PRAGMA {p}")).scalar() for p in pragmas])
        finally:
            await engine.dispose()

    assert asyncio.run(scenario()) == ("wal", 1000, 1, 1)


def test_without_wal_the_async_store_falls_back_to_delete(tmp_path: Path) -> None:
    path = tmp_path / "state.db"

    async def scenario() -> str:
        async with AsyncSessionDB(url=f"sqlite+aiosqlite:///file:{path}?vfs=unix-dotfile&uri=true") as db:
            await db.create_session("s", "cli")
            await db.append_message("s", "user", "stored without WAL")
            assert [hit["id"] for hit in await db.search_messages("stored")] == [1]
            async with db.engine.connect() as connection:
                return str((await connection.exec_driver_sql("PRAGMA journal_mode")).scalar())

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert asyncio.run(scenario()) == "delete"
    assert any(issubclass(w.category, JournalModeWarning) for w in caught)


def test_writes_begin_immediate_and_every_statement_reaches_cursor_events(store_path: Path) -> None:
    seen: list[str] = []

    async def scenario() -> None:
        async with AsyncSessionDB(store_path) as db:
            event.listen(db.sync_engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
            await db.create_session("s", "cli")
            await db.append_message("s", "user", "seen by events")
            await db.search_messages("events")

    asyncio.run(scenario())
    assert "BEGIN IMMEDIATE" in seen
    assert any(s.lstrip().upper().startswith("INSERT INTO MESSAGES") for s in seen), seen
    assert any("messages_fts" in s for s in seen), seen


def test_on_sqlite_a_call_runs_whole_on_one_worker_thread(store_path: Path) -> None:
    """One hop per call: every statement of a call runs on the same thread, not the loop's."""
    import threading

    seen: list[tuple[str, int]] = []

    async def scenario() -> tuple[int, list[tuple[str, int]]]:
        async with AsyncSessionDB(store_path) as db:
            await db.create_session("s", "cli")
            event.listen(
                db.sync_engine,
                "before_cursor_execute",
                lambda *a: seen.append((a[2], threading.get_ident())),
            )
            await db.append_message("s", "user", "one hop")
            return threading.get_ident(), list(seen)  # not close()'s checkpoint, another call

    loop_thread, threads = asyncio.run(scenario())
    statements = [statement.split()[0].upper() for statement, _thread in threads]
    assert statements[0] == "BEGIN" and "INSERT" in statements and "COMMIT" not in statements[:1]
    assert len({thread for _statement, thread in threads}) == 1
    assert threads[0][1] != loop_thread


def test_a_lock_held_past_the_attempt_budget_raises_write_conflict(
    store_path: Path, processes: Processes
) -> None:
    holder = processes.spawn("hold_lock", path=str(store_path), seconds=30)
    processes.expect(holder, "locked")

    async def scenario() -> tuple[int, int]:
        engine = create_async_engine(store_path)
        uow = AsyncUnitOfWork(engine, max_attempts=2, retry_min_s=0.01, retry_max_s=0.02)
        try:

            def work(session: orm.Session) -> None:
                session.execute(text("INSERT INTO state_meta(key, value) VALUES ('k', 'v')"))

            with pytest.raises(WriteConflict) as raised:
                await uow.write(work, "setting metadata")
            assert "setting metadata" in str(raised.value)
            return uow.retry_count, uow.write_count
        finally:
            await uow.close()

    assert asyncio.run(scenario()) == (1, 0)


def test_the_async_unit_of_work_commits_reads_and_rolls_back(store_path: Path) -> None:
    async def scenario() -> tuple[object, object, int]:
        uow = AsyncUnitOfWork(create_async_engine(store_path))
        try:

            def put(session: orm.Session) -> int:
                session.execute(text("INSERT INTO state_meta(key, value) VALUES ('kept', '1')"))
                return 7

            def half(session: orm.Session) -> None:
                session.execute(text("INSERT INTO state_meta(key, value) VALUES ('half', '1')"))
                raise ValueError("boom")

            assert await uow.write(put, "writing") == 7
            with pytest.raises(ValueError, match="boom"):
                await uow.write(half, "writing")
            await uow.checkpoint()

            def get(key: str) -> object:
                return lambda s: s.execute(
                    text("SELECT value FROM state_meta WHERE key = :k"), {"k": key}
                ).scalar()

            return await uow.read(get("kept")), await uow.read(get("half")), uow.write_count
        finally:
            await uow.close()

    assert asyncio.run(scenario()) == ("1", None, 1)


def test_the_async_unit_of_work_writes_on_a_core_connection(store_path: Path) -> None:
    async def scenario() -> tuple[object, object, int]:
        uow = AsyncUnitOfWork(create_async_engine(store_path))
        try:

            def half(conn: Connection) -> None:
                meta.put(conn, "half", "1")
                raise ValueError("boom")

            await uow.write_connection(lambda conn: meta.put(conn, "kept", "1"), "writing")
            with pytest.raises(ValueError, match="boom"):
                await uow.write_connection(half, "writing")
            kept = await uow.read(lambda s: meta.get(s, "kept"))
            return kept, await uow.read(lambda s: meta.get(s, "half")), uow.write_count
        finally:
            await uow.close()

    assert asyncio.run(scenario()) == ("1", None, 1)


def test_an_in_memory_async_store_works() -> None:
    async def scenario() -> tuple[int, int]:
        async with AsyncSessionDB("sqlite+aiosqlite://") as db:
            assert db.db_path is None
            await db.create_session("m", "cli")
            await db.append_message("m", "user", "kept in memory")
            return (await db.get_session("m"))["message_count"], len(await db.search_messages("memory"))

    assert asyncio.run(scenario()) == (1, 1)


def test_a_write_nested_in_a_write_raises_nested_write_but_concurrent_tasks_queue(store_path: Path) -> None:
    async def scenario() -> int:
        uow = AsyncUnitOfWork(create_async_engine(store_path))
        try:

            def nested(session: orm.Session) -> None:
                uow.sync.write(lambda inner: None, "an inner write")

            with pytest.raises(NestedWrite):
                await uow.write(nested, "an outer write")

            def put(n: int) -> Callable[[orm.Session], None]:
                return lambda s: (
                    s.execute(text("INSERT INTO state_meta VALUES (:k, 'v')"), {"k": f"k{n}"}) and None
                )

            await asyncio.gather(*(uow.write(put(n), "writing") for n in range(50)))
            counted = "SELECT COUNT(*) FROM state_meta WHERE key LIKE 'k%'"
            return int(await uow.read(lambda s: s.execute(text(counted)).scalar()))
        finally:
            await uow.close()

    assert asyncio.run(scenario()) == 50


def test_an_injected_engine_gets_our_settings_and_stays_the_callers(store_path: Path) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine as plain_async_engine

    seen: list[str] = []

    async def scenario() -> tuple[object, int]:
        engine = plain_async_engine(f"sqlite+aiosqlite:///{store_path}")
        try:
            async with AsyncSessionDB(engine=engine) as db:
                event.listen(db.sync_engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
                await db.create_session("s", "cli")
                async with engine.connect() as connection:
                    mode = (await connection.exec_driver_sql("PRAGMA journal_mode")).scalar()
            # close() left the caller's pool alone: its connections are still pooled.
            return mode, engine.pool.checkedin()  # type: ignore[attr-defined]
        finally:
            await engine.dispose()

    mode, pooled = asyncio.run(scenario())
    assert mode == "wal"
    assert pooled >= 1
    assert "BEGIN IMMEDIATE" in seen


def test_a_read_is_one_snapshot(store_path: Path) -> None:
    """A read transaction's statements all see the snapshot its first statement took."""
    import sqlite3

    async def scenario() -> tuple[int, int, int]:
        uow = AsyncUnitOfWork(create_async_engine(store_path))
        try:

            def work(session: orm.Session) -> tuple[int, int]:
                count = "SELECT COUNT(*) FROM state_meta WHERE key = 'written'"
                before = int(session.execute(text(count)).scalar_one())
                other = sqlite3.connect(store_path, isolation_level=None)
                other.execute("INSERT INTO state_meta VALUES ('written', 'meanwhile')")
                other.close()
                return before, int(session.execute(text(count)).scalar_one())

            before, during = await uow.read(work)
            written = "SELECT COUNT(*) FROM state_meta WHERE key = 'written'"
            after = int(await uow.read(lambda s: s.execute(text(written)).scalar_one()))
            return before, during, after
        finally:
            await uow.close()

    assert asyncio.run(scenario()) == (0, 0, 1)


def test_without_the_async_extra_the_import_error_says_what_to_install() -> None:
    import subprocess
    import sys

    code = "import sys; sys.modules['aiosqlite'] = None; import hermes_store.aio"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "pip install 'hermes-store[async]'" in result.stderr


def test_every_kind_of_read_answers_as_the_sync_store_does(store_url: str) -> None:
    """The async store's reads give the sync store's answers on the same rows, on both
    backends: searches of every kind, listings, transcripts, lineage and exports. (On
    PostgreSQL the behavioural suite runs its read-only modules through the sync API only.)"""
    sync_db = SessionDB(url=store_url) if "://" in store_url else SessionDB(store_url)
    try:
        sync_db.create_session("root", "cli", model="m1")
        sync_db.append_message("root", "user", "How do I fix the docker build? 服务器记忆")
        sync_db.append_message("root", "assistant", "Rebuild the docker image with --no-cache")
        sync_db.end_session("root", "compression")
        sync_db.create_session("tip", "telegram", parent_session_id="root")
        sync_db.append_messages(
            "tip",
            [
                {"role": "user", "content": "kubernetes pods keep restarting"},
                {"role": "tool", "content": "CrashLoopBackOff", "tool_name": "terminal"},
            ],
        )
        sync_db.set_session_title("tip", "Pods")
        sync_db.create_session("cron_nightly_1", "cron", cwd="/srv")
        queries = ["docker", '"docker image"', "kube*", "记忆", "docker 服务器", "terminal"]
        reads: list[tuple[str, tuple[object, ...], dict[str, object]]] = [
            *[("search_messages", (q,), {}) for q in queries],
            ("search_messages", ("docker",), {"source_filter": ["cli"], "role_filter": ["user"]}),
            ("list_sessions_rich", (), {}),
            ("list_sessions_rich", (), {"source": "telegram", "offset": 0, "limit": 5}),
            ("search_sessions", (), {}),
            ("get_messages_as_conversation", ("tip",), {}),
            ("get_messages", ("root",), {}),
            ("get_compression_tip", ("root",), {}),
            ("resolve_resume_session_id", ("root",), {}),
            ("get_session_by_title", ("Pods",), {}),
            ("get_descendants", ("root",), {}),
            ("export_session", ("tip",), {}),
            ("session_count", (), {}),
            ("message_count", (), {}),
            # Upstream head's listing parameters, positionally in their new order too.
            ("list_sessions_rich", ("telegram", None, None, 5, 0, True, 1), {}),
            ("list_sessions_rich", (), {"order_by_last_active": True, "id_query": "ROO"}),
            ("list_sessions_rich", (), {"order_by_last_active": True, "search_query": "pods"}),
            ("list_sessions_rich", (), {"include_archived": True, "min_message_count": 2}),
            ("session_count", (None, None, 0, True, False, True, ["cron"]), {}),
            ("search_sessions_by_id", ("ti",), {"limit": 3}),
            ("list_cron_job_runs", ("nightly",), {}),
        ]
        expected = [getattr(sync_db, name)(*args, **kwargs) for name, args, kwargs in reads]
    finally:
        sync_db.close()

    async def read_all() -> list[object]:
        async with AsyncSessionDB(store_url) as db:
            return [await getattr(db, name)(*args, **kwargs) for name, args, kwargs in reads]

    answers = asyncio.run(read_all())
    for (name, args, kwargs), want, got in zip(reads, expected, answers, strict=True):
        assert got == want, (name, args, kwargs)
    assert all(expected[: len(queries)]), "every search should find something"
