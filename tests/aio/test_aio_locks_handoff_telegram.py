"""The compression lease, handoff and Telegram topic methods on ``AsyncSessionDB``, awaited
from coroutines of one event loop: tasks racing for one lease or one handoff have exactly
one winner, and errors arrive as the sync store raises them."""

from __future__ import annotations

import asyncio

import pytest

from hermes_store.aio import AsyncSessionDB


def test_every_method_is_a_coroutine_of_the_async_store() -> None:
    names = (
        "try_acquire_compression_lock",
        "refresh_compression_lock",
        "release_compression_lock",
        "get_compression_lock_holder",
        "record_compression_failure_cooldown",
        "get_compression_failure_cooldown",
        "clear_compression_failure_cooldown",
        "record_gateway_session_peer",
        "find_latest_gateway_session_for_peer",
        "request_handoff",
        "get_handoff_state",
        "list_pending_handoffs",
        "claim_handoff",
        "complete_handoff",
        "fail_handoff",
        "apply_telegram_topic_migration",
        "enable_telegram_topic_mode",
        "disable_telegram_topic_mode",
        "is_telegram_topic_mode_enabled",
        "get_telegram_topic_binding",
        "get_telegram_topic_binding_by_session",
        "list_telegram_topic_bindings_for_chat",
        "is_telegram_session_linked_to_topic",
        "bind_telegram_topic",
        "delete_telegram_topic_binding",
        "list_unlinked_telegram_sessions_for_user",
    )
    missing = [name for name in names if not asyncio.iscoroutinefunction(getattr(AsyncSessionDB, name, None))]
    assert missing == []


def test_tasks_racing_for_a_lease_and_a_handoff(store_url: str) -> None:
    async def scenario() -> tuple[list[bool], list[bool], str | None]:
        async with AsyncSessionDB(store_url) as db:
            leases = await asyncio.gather(
                *(db.try_acquire_compression_lock("raced", f"task-{n}") for n in range(6))
            )
            holder = await db.get_compression_lock_holder("raced")
            # The emptied PostgreSQL store keeps leases between tests: leave none behind.
            await db.release_compression_lock("raced", holder or "")
            await db.create_session("s1", "cli")
            assert await db.request_handoff("s1", "telegram") is True
            claims = await asyncio.gather(*(db.claim_handoff("s1") for _ in range(6)))
            return list(leases), list(claims), holder

    leases, claims, holder = asyncio.run(scenario())
    assert sorted(leases) == [False] * 5 + [True]
    assert holder == f"task-{leases.index(True)}"
    assert sorted(claims) == [False] * 5 + [True]


def test_topic_binding_errors_arrive_as_the_sync_store_raises_them(store_url: str) -> None:
    async def scenario() -> None:
        async with AsyncSessionDB(store_url) as db:
            await db.disable_telegram_topic_mode(chat_id=1001)
            await db.create_session("s1", "telegram", user_id="42")
            await db.enable_telegram_topic_mode(chat_id=1001, user_id=42, has_topics_enabled=True)
            await db.bind_telegram_topic(
                chat_id=1001, thread_id=7, user_id=42, session_key="k", session_id="s1"
            )
            with pytest.raises(ValueError, match="already linked"):
                await db.bind_telegram_topic(
                    chat_id=1001, thread_id=8, user_id=42, session_key="k", session_id="s1"
                )
            assert await db.is_telegram_topic_mode_enabled(chat_id=1001, user_id=42) is True
            assert (await db.get_telegram_topic_binding_by_session(session_id="s1") or {})["thread_id"] == "7"
            assert await db.list_unlinked_telegram_sessions_for_user(chat_id=1001, user_id=42) == []
            assert await db.delete_telegram_topic_binding(chat_id=1001, thread_id=7) == 1
            assert await db.is_telegram_topic_mode_enabled(chat_id=1001, user_id=42) is False
            with pytest.raises(TypeError):
                await db.fail_handoff("s1", None)  # type: ignore[arg-type]

    asyncio.run(scenario())
