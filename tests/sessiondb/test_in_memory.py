"""``SessionDB(":memory:")``: an in-memory store, as upstream gives, never a file.

Every method works on it from any thread: the store's separate write and read
connections all reach the same database (hermes_store.db.memory says how).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy.engine import URL

from hermes_store import SessionDB, hermes_state
from hermes_store.aio import AsyncSessionDB


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory: a store that made a file would leave it here."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    return tmp_path


@pytest.mark.parametrize("target", [":memory:", Path(":memory:"), "sqlite://", "sqlite:///:memory:"])
def test_memory_store_is_in_memory(workdir: Path, target: str | Path) -> None:
    with SessionDB(target) as db:
        assert db.db_path is None
        db.create_session("parent", "cli", model="m")
        db.end_session("parent", "compression")
        db.create_session("child", "cli", parent_session_id="parent")
        db.append_message("child", "user", "a zebracorn in memory")
        db.append_message("child", "assistant", "noted", tool_calls=[{"id": "1"}])
        db.set_session_title("child", "Memories")
        assert db.get_session("child")["tool_call_count"] == 1  # type: ignore[index]
        assert [hit["session_id"] for hit in db.search_messages("zebracorn")] == ["child"]
        assert db.resolve_resume_session_id("parent") == "child"
        assert db.get_session_by_title("Memories")["id"] == "child"  # type: ignore[index]
        assert "child" in [row["id"] for row in db.list_sessions_rich()]
        assert db.session_count() == 2
        assert len(db.export_session("child")["messages"]) == 2  # type: ignore[index]
        db.replace_messages("child", [{"role": "user", "content": "rewritten"}])
        assert [m["content"] for m in db.get_messages("child")] == ["rewritten"]
        db.set_meta("k", "v")
        assert db.get_meta("k") == "v"
        assert db.delete_session("child") is True
        assert db.session_count() == 1
    assert list(workdir.iterdir()) == []


def test_every_thread_sees_the_same_memory_store(workdir: Path) -> None:
    with SessionDB(":memory:") as db:
        db.create_session("s", "cli")
        errors: list[BaseException] = []

        def writer(n: int) -> None:
            try:
                for i in range(20):
                    db.append_message("s", "user", f"thread {n} message {i}")
                    assert db.message_count("s") >= 1
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert db.message_count("s") == 80
        assert db.get_session("s")["message_count"] == 80  # type: ignore[index]
    assert list(workdir.iterdir()) == []


def _objects_in(url: URL) -> int:
    """How many schema objects the ``memdb`` database named in ``url`` holds, seen from a
    connection of its own (a database nobody holds open any more is empty again)."""
    probe = sqlite3.connect(f"{url.database}?vfs=memdb", uri=True)
    try:
        return int(probe.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])
    finally:
        probe.close()


def test_memory_stores_are_separate_and_gone_when_closed(workdir: Path) -> None:
    first, second = SessionDB(":memory:"), SessionDB(":memory:")
    first.create_session("only-in-first", "cli")
    assert second.get_session("only-in-first") is None
    url = first.engine.url
    assert _objects_in(url) > 0  # the probe reaches the store's database while it is open
    first.close()
    assert _objects_in(url) == 0  # closed: no connection of the store kept it alive
    second.close()


def test_upstream_path_and_async_memory_stores_make_no_file(workdir: Path) -> None:
    with hermes_state.SessionDB(":memory:") as db:
        db.create_session("s", "cli")
        assert db.get_session("s") is not None

    async def use() -> int:
        async with AsyncSessionDB(":memory:") as store:
            await store.create_session("s", "cli")
            await store.append_message("s", "user", "hello")
            return await store.message_count("s")

    assert asyncio.run(use()) == 1
    assert list(workdir.iterdir()) == []
