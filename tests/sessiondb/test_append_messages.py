"""``append_messages``: a turn's messages in one transaction, on both APIs and backends.

The yardstick is ``append_message`` called once per entry: the same rows (every column but
the timestamp), the same ids in order, the same counters — and all or nothing.
"""

from __future__ import annotations

import pytest

TOOL_CALLS = [
    {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}},
    {"id": "c2", "type": "function", "function": {"name": "clock", "arguments": "{}"}},
]

TURN = [
    {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": TOOL_CALLS,
        "finish_reason": "tool_calls",
        "reasoning": "check first",
        "token_count": 12,
    },
    {"role": "tool", "content": "exit 0", "tool_call_id": "c1", "tool_name": "terminal"},
    {
        "role": "tool",
        "content": [{"type": "text", "text": "12:00"}],
        "tool_call_id": "c2",
        "tool_name": "clock",
    },
    {"role": "assistant", "content": "Done.", "tool_calls": {"id": "c3"}, "reasoning_details": [{"k": 1}]},
]


def _without_volatile(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in {"id", "session_id", "timestamp"}} for row in rows]


def test_a_turn_is_stored_as_one_append_message_per_entry_would_store_it(db) -> None:
    db.create_session("batch", "cli")
    db.create_session("single", "cli")
    ids = db.append_messages("batch", TURN)
    singles = [db.append_message("single", **entry) for entry in TURN]
    assert len(ids) == 4 and ids == sorted(ids) and not set(ids) & set(singles)
    batch_rows = db.get_messages("batch")
    assert [row["id"] for row in batch_rows] == ids
    assert _without_volatile(batch_rows) == _without_volatile(db.get_messages("single"))
    batch, single = db.get_session("batch"), db.get_session("single")
    assert (batch["message_count"], batch["tool_call_count"]) == (4, 3)
    assert (batch["message_count"], batch["tool_call_count"]) == (
        single["message_count"],
        single["tool_call_count"],
    )
    assert [hit["id"] for hit in db.search_messages("12:00")] in ([ids[2], singles[2]], [singles[2], ids[2]])


def test_an_empty_turn_writes_nothing(db) -> None:
    db.create_session("s", "cli")
    assert db.append_messages("s", []) == []
    assert db.get_session("s")["message_count"] == 0


@pytest.mark.parametrize(
    "bad",
    [
        {"role": 7, "content": "role must be a str"},
        {"content": "no role"},
        {"role": "user", "token_count": "12"},
        {"role": "user", "unknown_keyword": 1},
        "not a dict",
    ],
)
def test_a_bad_entry_fails_the_whole_call_and_writes_nothing(db, bad) -> None:
    db.create_session("s", "cli")
    db.append_message("s", "user", "before")
    with pytest.raises(TypeError):
        db.append_messages("s", [{"role": "user", "content": "fine"}, bad])
    assert [m["content"] for m in db.get_messages("s")] == ["before"]
    assert db.get_session("s")["message_count"] == 1


def test_an_unknown_session_fails_the_whole_call_as_append_message_does(db) -> None:
    # The driver's IntegrityError on SQLite (as upstream), its foreign-key error on PostgreSQL.
    with pytest.raises(Exception) as batch_error:
        db.append_messages("missing", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    with pytest.raises(Exception) as single_error:
        db.append_message("missing", "user", "a")
    assert type(batch_error.value) is type(single_error.value)
    assert db.message_count() == 0


def test_a_bad_session_id_is_refused_before_anything_is_read(db) -> None:
    with pytest.raises(TypeError):
        db.append_messages(None, [{"role": "user", "content": "a"}])


def test_entries_take_the_platform_id_observed_flag_and_time(db) -> None:
    db.create_session("s", "cli")
    db.append_messages(
        "s",
        [
            {
                "role": "user",
                "content": "hi",
                "platform_message_id": "m-1",
                "observed": True,
                "timestamp": 50.0,
            },
            {"role": "user", "content": "there", "platform_message_id": 7},
        ],
    )
    first, second = db.get_messages("s")
    assert (first["platform_message_id"], first["observed"], first["timestamp"]) == ("m-1", 1, 50.0)
    assert (second["platform_message_id"], second["observed"]) == ("7", 0)
    assert second["timestamp"] > 1_000_000_000
