"""Messages: append (ids, counters, encodings, platform id, observed flag, given times),
get_messages (live rows unless asked), replace_messages (given times, sparing inactive
history), clear, counts, exports."""

from __future__ import annotations

import datetime
import logging
import sqlite3
import time

import pytest
from sqlalchemy import exc as sa_exc
from support import MESSAGE_COLUMNS

FLAGS = {"observed": 0, "active": 1, "compacted": 0}
"""The flag columns of a message just appended: a live message the agent was addressed by."""

WEATHER_CALL = {
    "id": "call_w1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
}
CLOCK_CALL = {"id": "call_c1", "type": "function", "function": {"name": "clock", "arguments": "{}"}}


@pytest.fixture
def sid(db):
    return db.create_session("msgs", "cli")


def counters(db, session_id):
    row = db.get_session(session_id)
    return row["message_count"], row["tool_call_count"]


# --- append_message: ids and counters ------------------------------------------------------------


def test_append_returns_increasing_integer_ids(db, sid):
    first = db.append_message(sid, "user", "one")
    second = db.append_message(sid, "assistant", "two")
    assert isinstance(first, int)
    assert (first, second) == (1, 2)
    assert [m["id"] for m in db.get_messages(sid)] == [1, 2]


@pytest.mark.parametrize("role", ["user", "assistant", "system", "tool", "narrator"])
def test_every_role_counts_as_a_message(db, sid, role):
    db.append_message(sid, role, "text")
    assert counters(db, sid) == (1, 0)
    assert db.get_messages(sid)[0]["role"] == role


@pytest.mark.parametrize(
    ("tool_calls", "added"),
    [
        ([WEATHER_CALL, CLOCK_CALL, WEATHER_CALL], 3),
        ([WEATHER_CALL], 1),
        (WEATHER_CALL, 1),
        ({}, 1),
        ("call", 1),
        (None, 0),
        ([], 0),
    ],
    ids=["list-of-3", "list-of-1", "dict", "empty-dict", "string", "none", "empty-list"],
)
def test_tool_call_count_rule(db, sid, tool_calls, added):
    db.append_message(sid, "assistant", "x", tool_calls=tool_calls)
    assert counters(db, sid) == (1, added)


def test_tool_role_message_adds_no_tool_calls(db, sid):
    db.append_message(sid, "assistant", None, tool_calls=[WEATHER_CALL])
    db.append_message(sid, "tool", '{"temp": 21}', tool_name="get_weather", tool_call_id="call_w1")
    assert counters(db, sid) == (2, 1)


def test_counters_accumulate(db, sid):
    db.append_message(sid, "user", "a")
    db.append_message(sid, "assistant", "b", tool_calls=[WEATHER_CALL, CLOCK_CALL])
    db.append_message(sid, "tool", "c")
    db.append_message(sid, "assistant", "d", tool_calls=[CLOCK_CALL])
    assert counters(db, sid) == (4, 3)


def test_append_to_missing_session_raises_integrity_error(db, sid):
    with pytest.raises(sqlite3.IntegrityError):
        db.append_message("no-such-session", "user", "lost")
    assert db.message_count() == 0


# --- append_message: what is stored --------------------------------------------------------------


def test_all_fields_round_trip(db, sid):
    db.append_message(
        sid,
        "assistant",
        "Checking the weather.",
        tool_name="get_weather",
        tool_calls=[WEATHER_CALL],
        tool_call_id="call_prev",
        token_count=42,
        finish_reason="tool_calls",
        reasoning="Need the forecast.",
        reasoning_content="Call the tool first.",
        reasoning_details=[{"type": "reasoning.text", "text": "think"}],
        codex_reasoning_items=[{"id": "rs_9", "encrypted_content": "Zm9v"}],
        codex_message_items=[{"id": "msg_9", "phase": "final"}],
        platform_message_id="upd-1234",
        observed=True,
        timestamp=1_700_000_000.25,
    )
    (message,) = db.get_messages(sid)
    assert set(message) == MESSAGE_COLUMNS
    assert message["session_id"] == sid
    assert message["role"] == "assistant"
    assert message["content"] == "Checking the weather."
    assert message["tool_name"] == "get_weather"
    assert message["tool_calls"] == [WEATHER_CALL]
    assert message["tool_call_id"] == "call_prev"
    assert message["token_count"] == 42
    assert message["finish_reason"] == "tool_calls"
    assert message["reasoning"] == "Need the forecast."
    assert message["reasoning_content"] == "Call the tool first."
    # These three stay raw JSON text in get_messages.
    assert message["reasoning_details"] == '[{"type": "reasoning.text", "text": "think"}]'
    assert message["codex_reasoning_items"] == '[{"id": "rs_9", "encrypted_content": "Zm9v"}]'
    assert message["codex_message_items"] == '[{"id": "msg_9", "phase": "final"}]'
    assert message["platform_message_id"] == "upd-1234"
    assert message["timestamp"] == 1_700_000_000.25
    assert (message["observed"], message["active"], message["compacted"]) == (1, 1, 0)


def test_defaults_are_null(db, sid):
    db.append_message(sid, "user")
    (message,) = db.get_messages(sid)
    for key in MESSAGE_COLUMNS - {"id", "session_id", "role", "timestamp"} - set(FLAGS):
        assert message[key] is None, key
    assert {key: message[key] for key in FLAGS} == FLAGS
    assert isinstance(message["timestamp"], float)


def test_timestamp_is_stored_as_real(db, sid, raw):
    message_id = db.append_message(sid, "user", "t")
    assert raw.typeof("messages", "timestamp", message_id) == "real"


@pytest.mark.parametrize(
    "column", ["tool_calls", "reasoning_details", "codex_reasoning_items", "codex_message_items"]
)
@pytest.mark.parametrize(
    "falsy", [[], {}, "", 0, False, None], ids=["list", "dict", "str", "zero", "false", "none"]
)
def test_falsy_json_values_are_stored_as_null(db, sid, raw, column, falsy):
    message_id = db.append_message(sid, "assistant", "x", **{column: falsy})
    assert raw.column("messages", column, message_id) is None
    assert db.get_messages(sid)[0][column] is None


def test_json_columns_use_default_separators(db, sid, raw):
    message_id = db.append_message(sid, "assistant", "x", tool_calls=[{"a": 1, "b": [2, 3]}])
    assert raw.column("messages", "tool_calls", message_id) == '[{"a": 1, "b": [2, 3]}]'


def test_reasoning_details_string_value_is_json_encoded(db, sid):
    db.append_message(sid, "assistant", "x", reasoning_details="plain words")
    assert db.get_messages(sid)[0]["reasoning_details"] == '"plain words"'


# --- content encodings ----------------------------------------------------------------------------

MULTIMODAL = [
    {"type": "text", "text": "What is in this picture?"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
]


def test_list_content_is_stored_behind_the_sentinel(db, sid, raw):
    message_id = db.append_message(sid, "user", MULTIMODAL)
    stored = raw.column("messages", "content", message_id)
    assert stored.startswith("\x00json:")
    assert db.get_messages(sid)[0]["content"] == MULTIMODAL


def test_dict_content_round_trips(db, sid, raw):
    content = {"kind": "card", "fields": {"title": "Ünïcode ✓"}}
    message_id = db.append_message(sid, "assistant", content)
    assert raw.column("messages", "content", message_id).startswith("\x00json:{")
    assert db.get_messages(sid)[0]["content"] == content


def test_tuple_content_reads_back_as_list(db, sid):
    db.append_message(sid, "user", ("a", "b"))
    assert db.get_messages(sid)[0]["content"] == ["a", "b"]


@pytest.mark.parametrize(("value", "expected"), [(5, "5"), (2.5, "2.5"), (-7, "-7")])
def test_numeric_content_reads_back_as_text(db, sid, value, expected):
    db.append_message(sid, "user", value)
    assert db.get_messages(sid)[0]["content"] == expected


def test_bytes_content_reads_back_as_bytes(db, sid, raw):
    message_id = db.append_message(sid, "user", b"\x01\x02binary")
    assert raw.typeof("messages", "content", message_id) == "blob"
    assert db.get_messages(sid)[0]["content"] == b"\x01\x02binary"


def test_unserialisable_content_is_stored_as_its_str(db, sid):
    db.append_message(sid, "user", {7})
    assert db.get_messages(sid)[0]["content"] == "{7}"


def test_empty_string_content_is_kept(db, sid, raw):
    message_id = db.append_message(sid, "user", "")
    assert raw.column("messages", "content", message_id) == ""
    assert db.get_messages(sid)[0]["content"] == ""


def test_sentinel_string_with_invalid_json_reads_back_raw(db, sid):
    db.append_message(sid, "user", "\x00json:{not json")
    assert db.get_messages(sid)[0]["content"] == "\x00json:{not json"


def test_content_is_returned_unsanitised(db, sid):
    text = "  <memory-context>recalled</memory-context>\n\nvisible  "
    db.append_message(sid, "assistant", text)
    assert db.get_messages(sid)[0]["content"] == text


def test_invalid_tool_calls_json_reads_back_as_empty_list(db, sid, raw):
    message_id = db.append_message(sid, "assistant", "x", tool_calls=[CLOCK_CALL])
    raw.execute("UPDATE messages SET tool_calls = '[{broken' WHERE id = ?", (message_id,))
    assert db.get_messages(sid)[0]["tool_calls"] == []


# --- get_messages ordering --------------------------------------------------------------------------


def test_get_messages_orders_by_id_even_when_timestamps_go_backwards(db, sid, raw):
    ids = [db.append_message(sid, "user", text) for text in ("first", "second", "third")]
    raw.set_message_time(ids[0], 3000.0)
    raw.set_message_time(ids[1], 2000.0)
    raw.set_message_time(ids[2], 1000.0)
    assert [m["content"] for m in db.get_messages(sid)] == ["first", "second", "third"]


def test_get_messages_only_returns_the_session(db, sid):
    db.create_session("other", "cli")
    db.append_message(sid, "user", "mine")
    db.append_message("other", "user", "theirs")
    db.append_message(sid, "assistant", "mine too")
    assert [m["content"] for m in db.get_messages(sid)] == ["mine", "mine too"]


def test_get_messages_of_missing_session_is_empty(db):
    assert db.get_messages("nothing-here") == []


# --- replace_messages -------------------------------------------------------------------------------


def test_replace_messages_rewrites_the_transcript(db, sid):
    db.append_message(sid, "user", "old question")
    db.append_message(sid, "assistant", "old answer", tool_calls=[CLOCK_CALL])
    assert (
        db.replace_messages(
            sid,
            [
                {"role": "user", "content": "new question"},
                {"role": "assistant", "content": None, "tool_calls": [WEATHER_CALL, CLOCK_CALL]},
                {"role": "tool", "content": "sunny", "tool_call_id": "call_w1", "tool_name": "get_weather"},
                {"role": "assistant", "content": "It is sunny.", "tool_calls": WEATHER_CALL},
            ],
        )
        is None
    )
    messages = db.get_messages(sid)
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "new question"),
        ("assistant", None),
        ("tool", "sunny"),
        ("assistant", "It is sunny."),
    ]
    assert messages[1]["tool_calls"] == [WEATHER_CALL, CLOCK_CALL]
    assert messages[3]["tool_calls"] == WEATHER_CALL
    assert (messages[2]["tool_call_id"], messages[2]["tool_name"]) == ("call_w1", "get_weather")
    assert counters(db, sid) == (4, 3)


def test_replace_messages_timestamps_increase_in_order(db, sid):
    db.replace_messages(sid, [{"role": "user", "content": str(i)} for i in range(5)])
    stamps = [m["timestamp"] for m in db.get_messages(sid)]
    assert stamps == sorted(stamps)
    assert len(set(stamps)) == 5


def test_replace_messages_keeps_reasoning_fields_for_assistant_only(db, sid):
    reasoning_fields = {
        "reasoning": "why",
        "reasoning_content": "how",
        "reasoning_details": [{"step": 1}],
        "codex_reasoning_items": [{"id": "rs"}],
        "codex_message_items": [{"id": "mi"}],
    }
    db.replace_messages(
        sid,
        [
            {"role": "user", "content": "u", **reasoning_fields},
            {"role": "assistant", "content": "a", **reasoning_fields},
            {"role": "tool", "content": "t", **reasoning_fields},
        ],
    )
    user, assistant, tool = db.get_messages(sid)
    for message in (user, tool):
        assert [message[key] for key in reasoning_fields] == [None] * 5
    assert assistant["reasoning"] == "why"
    assert assistant["reasoning_content"] == "how"
    assert assistant["reasoning_details"] == '[{"step": 1}]'
    assert assistant["codex_reasoning_items"] == '[{"id": "rs"}]'
    assert assistant["codex_message_items"] == '[{"id": "mi"}]'


def test_replace_messages_keeps_tool_and_finish_fields_for_every_role(db, sid):
    db.replace_messages(
        sid,
        [
            {
                "role": "user",
                "content": "u",
                "tool_call_id": "tc-1",
                "tool_name": "tn",
                "token_count": 12,
                "finish_reason": "stop",
            }
        ],
    )
    (message,) = db.get_messages(sid)
    assert (
        message["tool_call_id"],
        message["tool_name"],
        message["token_count"],
        message["finish_reason"],
    ) == (
        "tc-1",
        "tn",
        12,
        "stop",
    )


def test_replace_messages_role_defaults_to_unknown(db, sid):
    db.replace_messages(sid, [{"content": "no role given"}])
    assert db.get_messages(sid)[0]["role"] == "unknown"


def test_replace_messages_encodes_content_and_falsy_json(db, sid, raw):
    db.replace_messages(
        sid, [{"role": "user", "content": MULTIMODAL, "tool_calls": []}, {"role": "user", "content": 9}]
    )
    first, second = db.get_messages(sid)
    assert first["content"] == MULTIMODAL
    assert first["tool_calls"] is None
    assert second["content"] == "9"
    assert raw.one("SELECT COUNT(*) FROM messages WHERE tool_calls IS NOT NULL") == 0


def test_replace_messages_with_empty_list_empties_the_session(db, sid):
    db.append_message(sid, "user", "gone", tool_calls=[CLOCK_CALL])
    db.replace_messages(sid, [])
    assert db.get_messages(sid) == []
    assert counters(db, sid) == (0, 0)
    assert db.get_session(sid) is not None


def test_replace_messages_leaves_other_sessions_alone(db, sid):
    db.create_session("neighbour", "cli")
    db.append_message("neighbour", "user", "stay")
    db.replace_messages(sid, [{"role": "user", "content": "mine"}])
    assert [m["content"] for m in db.get_messages("neighbour")] == ["stay"]
    assert counters(db, "neighbour") == (1, 0)


def test_replace_messages_is_atomic(db, sid):
    db.append_message(sid, "user", "original")
    db.append_message(sid, "assistant", "kept", tool_calls=[CLOCK_CALL])
    bad_batch = [
        {"role": "user", "content": "replacement"},
        {"role": "user", "content": "unbindable", "token_count": {"not": "an int"}},
    ]
    with pytest.raises((sqlite3.Error, sa_exc.SQLAlchemyError)):
        db.replace_messages(sid, bad_batch)
    assert [m["content"] for m in db.get_messages(sid)] == ["original", "kept"]
    assert counters(db, sid) == (2, 1)
    assert db.search_messages("replacement") == []


def test_replace_messages_for_missing_session_raises_integrity_error(db):
    with pytest.raises(sqlite3.IntegrityError):
        db.replace_messages("absent", [{"role": "user", "content": "x"}])
    assert db.message_count() == 0


def test_replace_then_append_continues_ids(db, sid):
    db.replace_messages(sid, [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    new_id = db.append_message(sid, "user", "c")
    assert [m["id"] for m in db.get_messages(sid)][-1] == new_id
    assert [m["content"] for m in db.get_messages(sid)] == ["a", "b", "c"]
    assert counters(db, sid) == (3, 0)


# --- clear_messages ----------------------------------------------------------------------------------


def test_clear_messages(db, sid):
    db.create_session("neighbour", "cli")
    db.append_message(sid, "user", "bye", tool_calls=[CLOCK_CALL, CLOCK_CALL])
    db.append_message("neighbour", "user", "hello")
    db.update_token_counts(sid, input_tokens=70, output_tokens=30, estimated_cost_usd=0.5)
    db.set_session_title(sid, "Still here")
    assert db.clear_messages(sid) is None
    assert db.get_messages(sid) == []
    row = db.get_session(sid)
    assert (row["message_count"], row["tool_call_count"]) == (0, 0)
    assert (row["input_tokens"], row["output_tokens"], row["estimated_cost_usd"], row["title"]) == (
        70,
        30,
        0.5,
        "Still here",
    )
    assert [m["content"] for m in db.get_messages("neighbour")] == ["hello"]


def test_clear_messages_of_missing_session_is_a_no_op(db):
    db.clear_messages("missing")
    assert db.session_count() == 0


# --- counts ---------------------------------------------------------------------------------------


def test_message_count(db, sid):
    db.create_session("other", "cli")
    for text in ("a", "b", "c"):
        db.append_message(sid, "user", text)
    db.append_message("other", "user", "d")
    assert db.message_count() == 4
    assert db.message_count(sid) == 3
    assert db.message_count("other") == 1
    assert db.message_count("missing") == 0
    assert db.message_count("") == 4
    assert db.message_count(None) == 4


def test_session_count(db):
    db.create_session("a", "cli")
    db.create_session("b", "cli")
    db.create_session("c", "telegram")
    assert db.session_count() == 3
    assert db.session_count("cli") == 2
    assert db.session_count("telegram") == 1
    assert db.session_count("discord") == 0
    assert db.session_count("") == 3


# --- append_message: platform id, observed flag, given time --------------------------------------


@pytest.mark.parametrize(("given", "stored"), [("tg-9", "tg-9"), (123456, "123456"), (None, None)])
def test_platform_message_id_is_stored_as_text(db, sid, given, stored):
    db.append_message(sid, "user", "hi", platform_message_id=given)
    assert db.get_messages(sid)[0]["platform_message_id"] == stored


@pytest.mark.parametrize("bad", [b"raw", ["id"], True])
def test_platform_message_id_of_another_type_is_refused(db, sid, bad):
    with pytest.raises(TypeError, match="platform_message_id"):
        db.append_message(sid, "user", "hi", platform_message_id=bad)
    assert db.message_count(sid) == 0


@pytest.mark.parametrize(("given", "stored"), [(True, 1), (False, 0), (1, 1), ("yes", 1), (None, 0), (0, 0)])
def test_observed_is_stored_as_one_or_zero(db, sid, given, stored):
    db.append_message(sid, "user", "seen", observed=given)
    assert db.get_messages(sid)[0]["observed"] == stored


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        (1_700_000_000.5, 1_700_000_000.5),
        (1_700_000_000, 1_700_000_000.0),
        ("1700000000.25", 1_700_000_000.25),
        (datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC), 1_704_067_200.0),
    ],
    ids=["float", "int", "numeric-text", "datetime"],
)
def test_a_given_timestamp_is_stored(db, sid, given, stored):
    db.append_message(sid, "user", "then", timestamp=given)
    assert db.get_messages(sid)[0]["timestamp"] == stored


@pytest.mark.parametrize(
    "bad", ["tomorrow", object(), float("nan"), float("inf")], ids=["text", "object", "nan", "inf"]
)
def test_a_timestamp_that_is_no_time_is_ignored(db, sid, bad, caplog):
    before = time.time()
    with caplog.at_level(logging.DEBUG, logger="hermes_store.domain.codec"):
        db.append_message(sid, "user", "now", timestamp=bad)
    assert before - 1 <= db.get_messages(sid)[0]["timestamp"] <= time.time() + 1
    assert any("timestamp" in record.getMessage() for record in caplog.records)


def test_positional_arguments_keep_their_places(db, sid):
    args = ("tool", "out", "clock", None, "call_1", 5, "stop", None, None, None, None, None)
    db.append_message(sid, *args)
    message = db.get_messages(sid)[0]
    assert (message["tool_name"], message["tool_call_id"], message["token_count"]) == ("clock", "call_1", 5)
    assert (message["platform_message_id"], message["observed"]) == (None, 0)


# --- live rows, inactive rows ------------------------------------------------------------------------


@pytest.fixture
def history(db, sid, raw):
    """A session with one archived, one rewound and two live messages (ids 1-4)."""
    ids = [db.append_message(sid, "user", text) for text in ("archived", "rewound", "live 1", "live 2")]
    raw.execute("UPDATE messages SET active = 0, compacted = 1 WHERE id = ?", (ids[0],))
    raw.execute("UPDATE messages SET active = 0 WHERE id = ?", (ids[1],))
    return ids


def test_get_messages_returns_live_rows_unless_asked(db, sid, history):
    assert [m["content"] for m in db.get_messages(sid)] == ["live 1", "live 2"]
    every = db.get_messages(sid, include_inactive=True)
    assert [(m["content"], m["active"], m["compacted"]) for m in every] == [
        ("archived", 0, 1),
        ("rewound", 0, 0),
        ("live 1", 1, 0),
        ("live 2", 1, 0),
    ]


def test_message_count_counts_inactive_rows(db, sid, history):
    assert db.message_count(sid) == 4
    assert db.message_count() == 4


def test_exports_hold_the_live_messages(db, sid, history):
    assert [m["content"] for m in db.export_session(sid)["messages"]] == ["live 1", "live 2"]
    (exported,) = db.export_all()
    assert [m["content"] for m in exported["messages"]] == ["live 1", "live 2"]
    (by_source,) = db.export_all(source="cli")
    assert [m["content"] for m in by_source["messages"]] == ["live 1", "live 2"]


def test_clear_messages_deletes_inactive_rows_too(db, sid, history):
    db.clear_messages(sid)
    assert db.get_messages(sid, include_inactive=True) == []


def test_replace_messages_deletes_inactive_rows_by_default(db, sid, history):
    db.replace_messages(sid, [{"role": "user", "content": "fresh"}])
    assert [m["content"] for m in db.get_messages(sid, include_inactive=True)] == ["fresh"]
    assert counters(db, sid) == (1, 0)


def test_replace_messages_active_only_keeps_inactive_history(db, sid, history):
    fresh = [{"role": "user", "content": "fresh", "tool_calls": [CLOCK_CALL]}]
    db.replace_messages(sid, fresh, active_only=True)
    assert [(m["content"], m["active"]) for m in db.get_messages(sid, include_inactive=True)] == [
        ("archived", 0),
        ("rewound", 0),
        ("fresh", 1),
    ]
    assert counters(db, sid) == (1, 1)


# --- replace_messages: given times, platform ids, observed flags ----------------------------------


def test_replace_messages_keeps_given_times_and_runs_a_clock_for_the_rest(db, sid):
    before = time.time()
    db.replace_messages(
        sid,
        [
            {"role": "user", "content": "a"},
            {"role": "user", "content": "b", "timestamp": 100.0},
            {"role": "user", "content": "c"},
            {"role": "user", "content": "d", "timestamp": 4e9},
            {"role": "user", "content": "e"},
            {"role": "user", "content": "f", "timestamp": "no time"},
        ],
    )
    a, b, c, d, e, f = (m["timestamp"] for m in db.get_messages(sid))
    assert before <= a <= time.time()
    assert b == 100.0
    assert c == pytest.approx(a + 1e-6, abs=1e-6) and c > a
    assert d == 4e9
    assert e == pytest.approx(4e9 + 1e-6, abs=1e-6) and e > d
    assert f > e


def test_replace_messages_accepts_datetimes(db, sid):
    moment = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
    db.replace_messages(sid, [{"role": "user", "content": "a", "timestamp": moment}])
    assert db.get_messages(sid)[0]["timestamp"] == 1_704_067_200.0


def test_replace_messages_takes_the_platform_id_from_either_key(db, sid):
    db.replace_messages(
        sid,
        [
            {"role": "user", "content": "a", "platform_message_id": "p-1", "message_id": "ignored"},
            {"role": "user", "content": "b", "message_id": "m-2"},
            {"role": "user", "content": "c", "platform_message_id": "", "message_id": 33},
            {"role": "user", "content": "d"},
        ],
    )
    assert [m["platform_message_id"] for m in db.get_messages(sid)] == ["p-1", "m-2", "33", None]


def test_replace_messages_stores_the_observed_flag(db, sid):
    db.replace_messages(
        sid, [{"role": "user", "content": "a", "observed": True}, {"role": "user", "content": "b"}]
    )
    assert [m["observed"] for m in db.get_messages(sid)] == [1, 0]


def test_conversation_round_trips_through_replace_messages(db, sid):
    db.append_message(sid, "user", "seen", platform_message_id="u-1", observed=True, timestamp=10.0)
    db.append_message(sid, "assistant", "reply", timestamp=11.0)
    conversation = db.get_messages_as_conversation(sid)
    db.replace_messages(sid, conversation)
    assert db.get_messages_as_conversation(sid) == conversation


def test_replace_messages_takes_its_arguments_by_upstreams_names(db) -> None:
    db.create_session("s", "cli")
    db.append_message("s", "user", "old")
    db.replace_messages(session_id="s", messages=[{"role": "user", "content": "new"}], active_only=True)
    assert [m["content"] for m in db.get_messages("s")] == ["new"]
