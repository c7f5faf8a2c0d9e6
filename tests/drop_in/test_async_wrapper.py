"""``hermes_state.AsyncSessionDB``: upstream's thin asyncio wrapper around a store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import hermes_state
import hermes_store.aio


def test_it_is_upstreams_wrapper_not_the_stores_asyncio_face() -> None:
    assert hermes_state.AsyncSessionDB is not hermes_store.aio.AsyncSessionDB


def test_methods_run_in_a_thread_and_plain_attributes_come_back_as_they_are(tmp_path: Path) -> None:
    store = hermes_state.SessionDB(tmp_path / "state.db")
    wrapped = hermes_state.AsyncSessionDB(store)

    async def scenario() -> dict[str, Any] | None:
        await wrapped.create_session("s1", "cli")
        await asyncio.gather(*(wrapped.append_message("s1", "user", f"m{n}") for n in range(5)))
        return await wrapped.get_session("s1")

    try:
        assert wrapped._db is store
        assert wrapped.db_path == store.db_path
        assert wrapped.read_only is False
        session = asyncio.run(scenario())
        assert session is not None and session["message_count"] == 5
    finally:
        store.close()


def test_the_offloading_goes_through_hermes_state_asyncio_to_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = hermes_state.SessionDB(tmp_path / "state.db")
    handed: list[str] = []
    real_to_thread = asyncio.to_thread

    async def spy(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        handed.append(function.__name__)
        return await real_to_thread(function, *args, **kwargs)

    monkeypatch.setattr(hermes_state.asyncio, "to_thread", spy)
    try:
        asyncio.run(hermes_state.AsyncSessionDB(store).session_count())
    finally:
        store.close()
    assert handed == ["session_count"]


def test_a_call_not_awaited_is_a_coroutine(tmp_path: Path) -> None:
    store = hermes_state.SessionDB(tmp_path / "state.db")
    try:
        pending = hermes_state.AsyncSessionDB(store).session_count()
        assert asyncio.iscoroutine(pending)
        assert asyncio.run(pending) == 0
    finally:
        store.close()
