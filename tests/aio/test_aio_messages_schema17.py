"""``AsyncSessionDB`` with upstream head's message arguments and the compaction, rewind and
view coroutines, awaited on an event loop (the behavioural suite drives them through a
blocking proxy; this module awaits them the way an asyncio service does)."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path

from hermes_store.aio import AsyncSessionDB


def test_messages_at_schema_17_on_the_async_face(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with AsyncSessionDB(tmp_path / "state.db") as db:
            await db.create_session("s", "telegram")
            moment = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
            first = await db.append_message(
                "s", "user", "hello", platform_message_id="upd-1", observed=True, timestamp=moment
            )
            await db.append_message("s", "assistant", "hi")
            (entry, _) = await db.get_messages_as_conversation("s")
            assert entry == {
                "role": "user",
                "content": "hello",
                "timestamp": 1_704_067_200.0,
                "message_id": "upd-1",
                "observed": True,
            }
            assert await db.has_platform_message_id("s", "upd-1") is True

            assert await db.archive_and_compact("s", [{"role": "user", "content": "summary"}]) == 1
            assert await db.has_archived_messages("s") is True
            (summary,) = await db.get_messages("s")
            assert len(await db.get_messages("s", include_inactive=True)) == 3

            rewound = await db.rewind_to_message("s", summary["id"])
            assert (rewound["rewound_count"], rewound["new_head_id"]) == (1, None)
            assert await db.list_recent_user_messages("s") == []
            assert len(await db.list_recent_user_messages("s", include_inactive=True)) == 2
            assert await db.restore_rewound("s", summary["id"]) == 1

            view = await db.get_anchored_view("s", first, window=1, bookend=1)
            assert [row["id"] for row in view["window"]] == [first, first + 1]
            assert [row["content"] for row in view["bookend_end"]] == ["summary"]
            around = await db.get_messages_around("s", first, window=0)
            assert around["window"][0]["compacted"] == 1

            await db.replace_messages("s", [{"role": "user", "content": "fresh"}], active_only=True)
            assert [m["content"] for m in await db.get_messages("s", include_inactive=True)] == [
                "hello",
                "hi",
                "fresh",
            ]

    asyncio.run(scenario())


def test_concurrent_tasks_append_with_their_own_times(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with AsyncSessionDB(tmp_path / "state.db") as db:
            await db.create_session("s", "cli")
            await asyncio.gather(
                *(db.append_message("s", "user", f"m{n}", timestamp=1000.0 + n) for n in range(20))
            )
            stored = {m["content"]: m["timestamp"] for m in await db.get_messages("s")}
            assert stored == {f"m{n}": 1000.0 + n for n in range(20)}

    asyncio.run(scenario())
