"""In-place compaction: ``archive_and_compact`` and ``has_archived_messages``, on both
backends and both APIs."""

from __future__ import annotations

import pytest

CALL = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{}"}}


@pytest.fixture
def sid(db):
    return db.create_session("compact-me", "cli")


def states(db, session_id):
    """``(content, active, compacted)`` of every stored message, in id order."""
    return [
        (m["content"], m["active"], m["compacted"])
        for m in db.get_messages(session_id, include_inactive=True)
    ]


def counters(db, session_id):
    row = db.get_session(session_id)
    return row["message_count"], row["tool_call_count"]


def is_integrity_error(error: BaseException) -> bool:
    # sqlite3.IntegrityError on SQLite; psycopg's IntegrityError subclasses on PostgreSQL.
    return any(cls.__name__ == "IntegrityError" for cls in type(error).__mro__)


def test_live_messages_are_archived_and_the_new_list_becomes_live(db, sid):
    db.append_message(sid, "user", "Find me a hotel")
    db.append_message(sid, "assistant", None, tool_calls=[CALL, CALL])
    db.append_message(sid, "tool", "3 hotels", tool_call_id="call_1")
    stored = db.archive_and_compact(
        sid,
        [
            {"role": "user", "content": "[summary] looking for a hotel"},
            {"role": "assistant", "content": "Here are 3.", "tool_calls": [CALL]},
        ],
    )
    assert stored == 2
    assert states(db, sid) == [
        ("Find me a hotel", 0, 1),
        (None, 0, 1),
        ("3 hotels", 0, 1),
        ("[summary] looking for a hotel", 1, 0),
        ("Here are 3.", 1, 0),
    ]
    assert [m["content"] for m in db.get_messages(sid)] == ["[summary] looking for a hotel", "Here are 3."]
    assert counters(db, sid) == (2, 1)
    assert db.message_count(sid) == 5


def test_a_carried_over_message_keeps_its_time_and_replays_once(db, sid):
    db.append_message(sid, "user", "old question", timestamp=100.0)
    db.append_message(sid, "assistant", None, tool_calls=[CALL], timestamp=101.0)
    db.append_message(sid, "tool", "result", tool_call_id="call_1", timestamp=102.0)
    tail = db.get_messages_as_conversation(sid)[1:]
    db.archive_and_compact(sid, [{"role": "user", "content": "[summary]"}, *tail])
    replay = db.get_messages_as_conversation(sid)
    assert [(m["role"], m["content"]) for m in replay] == [
        ("user", "[summary]"),
        ("assistant", None),
        ("tool", "result"),
    ]
    assert [m["timestamp"] for m in replay[1:]] == [101.0, 102.0]
    assert replay[1]["tool_calls"] == [CALL]


def test_rewound_messages_are_left_as_they_are(db, sid):
    db.append_message(sid, "user", "kept")
    undone = db.append_message(sid, "user", "undone")
    db.rewind_to_message(sid, undone)
    db.archive_and_compact(sid, [{"role": "user", "content": "summary"}])
    assert states(db, sid) == [("kept", 0, 1), ("undone", 0, 0), ("summary", 1, 0)]


def test_compacting_again_archives_the_previous_summary(db, sid):
    db.append_message(sid, "user", "first")
    db.archive_and_compact(sid, [{"role": "user", "content": "summary 1"}])
    db.append_message(sid, "user", "second")
    db.archive_and_compact(sid, [{"role": "user", "content": "summary 2"}])
    assert states(db, sid) == [
        ("first", 0, 1),
        ("summary 1", 0, 1),
        ("second", 0, 1),
        ("summary 2", 1, 0),
    ]
    assert counters(db, sid) == (1, 0)


def test_an_empty_list_archives_everything(db, sid):
    db.append_message(sid, "user", "a", tool_calls=[CALL])
    assert db.archive_and_compact(sid, []) == 0
    assert db.get_messages(sid) == []
    assert states(db, sid) == [("a", 0, 1)]
    assert counters(db, sid) == (0, 0)


def test_entries_are_stored_as_replace_messages_stores_them(db, sid):
    db.archive_and_compact(
        sid,
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi"}],
                "message_id": "tg-5",
                "observed": True,
            },
            {"role": "tool", "content": "x", "reasoning": "dropped: not an assistant", "timestamp": 42.0},
            {"content": "no role"},
        ],
    )
    first, second, third = db.get_messages(sid)
    assert (first["content"], first["platform_message_id"], first["observed"]) == (
        [{"type": "text", "text": "hi"}],
        "tg-5",
        1,
    )
    assert (second["reasoning"], second["timestamp"]) == (None, 42.0)
    assert third["role"] == "unknown"
    # The running clock goes on from the first entry: an earlier given time does not pull it back.
    assert third["timestamp"] > first["timestamp"] > second["timestamp"]


def test_a_missing_session_raises_integrity_error_and_changes_nothing(db, sid):
    db.append_message(sid, "user", "untouched")
    with pytest.raises(Exception) as raised:
        db.archive_and_compact("absent", [{"role": "user", "content": "summary"}])
    assert is_integrity_error(raised.value)
    assert db.message_count() == 1
    assert states(db, sid) == [("untouched", 1, 0)]


def test_a_failing_insert_rolls_the_archiving_back(db, sid):
    db.append_message(sid, "user", "original", tool_calls=[CALL])
    bad = [{"role": "user", "content": "summary"}, {"role": "user", "content": "x", "token_count": {"no": 1}}]
    with pytest.raises(Exception):  # noqa: B017 - the driver's own error for an unbindable value
        db.archive_and_compact(sid, bad)
    assert states(db, sid) == [("original", 1, 0)]
    assert counters(db, sid) == (1, 1)


def test_an_entry_that_is_not_a_dict_is_refused_before_anything_is_written(db, sid):
    db.append_message(sid, "user", "original")
    with pytest.raises(TypeError):
        db.archive_and_compact(sid, [{"role": "user", "content": "ok"}, "not a message"])
    assert states(db, sid) == [("original", 1, 0)]


def test_has_archived_messages(db, sid):
    assert db.has_archived_messages(sid) is False
    assert db.has_archived_messages("absent") is False
    db.append_message(sid, "user", "a")
    assert db.has_archived_messages(sid) is False
    db.archive_and_compact(sid, [{"role": "user", "content": "summary"}])
    assert db.has_archived_messages(sid) is True


def test_has_archived_messages_is_true_for_rewound_rows_too(db, sid):
    target = db.append_message(sid, "user", "undone")
    db.rewind_to_message(sid, target)
    assert db.has_archived_messages(sid) is True


def test_other_sessions_are_untouched(db, sid):
    db.create_session("neighbour", "cli")
    db.append_message("neighbour", "user", "theirs")
    db.append_message(sid, "user", "mine")
    db.archive_and_compact(sid, [])
    assert states(db, "neighbour") == [("theirs", 1, 0)]
    assert db.has_archived_messages("neighbour") is False
