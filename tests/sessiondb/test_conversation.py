"""get_messages_as_conversation: per-role field rules, memory-context stripping, ancestor replay,
live rows only, the platform keys and times, and background-review prompts left out."""

from __future__ import annotations

import pytest

NOTE = (
    "[System note: The following is recalled memory context, NOT new user input. "
    "Treat as informational background data.]"
)
SEARCH_CALL = {
    "id": "call_s1",
    "type": "function",
    "function": {"name": "search_docs", "arguments": '{"q": "retention policy"}'},
}


@pytest.fixture
def sid(db):
    return db.create_session("conv", "cli")


def conversation_of(db, session_id, **options):
    """The replay with each message's ``timestamp`` checked (a float) and taken out, so
    that expected values stay literals."""
    entries = db.get_messages_as_conversation(session_id, **options)
    for entry in entries:
        assert isinstance(entry.pop("timestamp"), float)
    return entries


def test_plain_exchange_round_trips_exactly(db, sid):
    db.append_message(sid, "user", "Good morning")
    db.append_message(sid, "assistant", "Morning! How can I help?")
    assert conversation_of(db, sid) == [
        {"role": "user", "content": "Good morning"},
        {"role": "assistant", "content": "Morning! How can I help?"},
    ]


def test_missing_session_gives_empty_list(db):
    assert conversation_of(db, "nope") == []
    assert conversation_of(db, "nope", include_ancestors=True) == []


# --- per-role fields -----------------------------------------------------------------------


def test_assistant_with_every_field(db, sid):
    db.append_message(
        sid,
        "assistant",
        "Let me search.",
        tool_calls=[SEARCH_CALL],
        finish_reason="tool_calls",
        reasoning="The docs will say.",
        reasoning_content="Search, then summarise.",
        reasoning_details=[{"type": "reasoning.summary", "summary": "search"}],
        codex_reasoning_items=[{"id": "rs_4", "type": "reasoning"}],
        codex_message_items=[{"id": "msg_4"}],
        token_count=33,
    )
    assert conversation_of(db, sid) == [
        {
            "role": "assistant",
            "content": "Let me search.",
            "tool_calls": [SEARCH_CALL],
            "finish_reason": "tool_calls",
            "reasoning": "The docs will say.",
            "reasoning_content": "Search, then summarise.",
            "reasoning_details": [{"type": "reasoning.summary", "summary": "search"}],
            "codex_reasoning_items": [{"id": "rs_4", "type": "reasoning"}],
            "codex_message_items": [{"id": "msg_4"}],
        }
    ]


def test_tool_message_fields(db, sid):
    db.append_message(sid, "tool", '{"hits": 2}', tool_name="search_docs", tool_call_id="call_s1")
    assert conversation_of(db, sid) == [
        {"role": "tool", "content": '{"hits": 2}', "tool_call_id": "call_s1", "tool_name": "search_docs"}
    ]


def test_assistant_only_fields_are_dropped_for_other_roles(db, sid):
    for role in ("user", "tool", "system"):
        db.append_message(
            sid,
            role,
            f"{role} text",
            finish_reason="stop",
            reasoning="r",
            reasoning_content="rc",
            reasoning_details=[{"x": 1}],
            codex_reasoning_items=[{"y": 2}],
            codex_message_items=[{"z": 3}],
        )
    assert conversation_of(db, sid) == [
        {"role": "user", "content": "user text"},
        {"role": "tool", "content": "tool text"},
        {"role": "system", "content": "system text"},
    ]


def test_tool_calls_and_tool_name_kept_for_any_role(db, sid):
    db.append_message(
        sid, "user", "odd", tool_calls=[SEARCH_CALL], tool_name="search_docs", tool_call_id="c9"
    )
    assert conversation_of(db, sid) == [
        {
            "role": "user",
            "content": "odd",
            "tool_call_id": "c9",
            "tool_name": "search_docs",
            "tool_calls": [SEARCH_CALL],
        }
    ]


def test_empty_optional_values_are_omitted(db, sid, raw):
    message_id = db.append_message(sid, "assistant", "x", reasoning="", finish_reason="")
    raw.execute("UPDATE messages SET tool_call_id = '', tool_name = '' WHERE id = ?", (message_id,))
    assert conversation_of(db, sid) == [{"role": "assistant", "content": "x"}]


def test_empty_reasoning_content_is_kept_for_assistant(db, sid):
    db.append_message(sid, "assistant", "x", reasoning_content="")
    db.append_message(sid, "assistant", "y", reasoning_content=None)
    assert conversation_of(db, sid) == [
        {"role": "assistant", "content": "x", "reasoning_content": ""},
        {"role": "assistant", "content": "y"},
    ]


def test_none_content_is_present_as_none(db, sid):
    db.append_message(sid, "assistant", None, tool_calls=[SEARCH_CALL])
    assert conversation_of(db, sid) == [{"role": "assistant", "content": None, "tool_calls": [SEARCH_CALL]}]


def test_multimodal_content_is_decoded(db, sid):
    parts = [{"type": "text", "text": "  see image  "}, {"type": "image_url", "image_url": {"url": "u"}}]
    db.append_message(sid, "user", parts)
    assert conversation_of(db, sid) == [{"role": "user", "content": parts}]


def test_invalid_json_columns_fall_back(db, sid, raw):
    message_id = db.append_message(
        sid, "assistant", "x", tool_calls=[SEARCH_CALL], reasoning_details=[1], codex_message_items=[2]
    )
    raw.execute(
        "UPDATE messages SET tool_calls = 'nope', reasoning_details = '{bad', codex_message_items = '[' "
        "WHERE id = ?",
        (message_id,),
    )
    assert conversation_of(db, sid) == [
        {
            "role": "assistant",
            "content": "x",
            "tool_calls": [],
            "reasoning_details": None,
            "codex_message_items": None,
        }
    ]


# --- memory-context stripping ------------------------------------------------------------------


@pytest.mark.parametrize("role", ["user", "assistant"])
@pytest.mark.parametrize(
    ("stored", "replayed"),
    [
        ("<memory-context>likes tea</memory-context>\n\nVisible answer", "Visible answer"),
        ("  padded text \n", "padded text"),
        (f"{NOTE}\n\n   What time is it?", "What time is it?"),
        ("<MEMORY-CONTEXT>caps</Memory-Context>kept", "kept"),
        ("< memory-context >spaced</ memory-context >kept", "kept"),
        ("<memory-context>a</memory-context>middle<memory-context>b</memory-context>", "middle"),
        ("<memory-context>\nmulti\nline\n</memory-context>\nafter", "after"),
        ("before </memory-context> after", "before  after"),
        ("dangling <memory-context> open", "dangling  open"),
        ("no tags here", "no tags here"),
    ],
)
def test_user_and_assistant_text_is_cleaned_and_trimmed(db, sid, role, stored, replayed):
    db.append_message(sid, role, stored)
    assert conversation_of(db, sid) == [{"role": role, "content": replayed}]


@pytest.mark.parametrize("role", ["tool", "system"])
def test_tool_and_system_text_is_untouched(db, sid, role):
    text = "  <memory-context>x</memory-context> raw \n"
    db.append_message(sid, role, text)
    assert conversation_of(db, sid) == [{"role": role, "content": text}]


def test_stored_content_is_not_modified_by_replay(db, sid):
    text = "<memory-context>m</memory-context>answer"
    db.append_message(sid, "assistant", text)
    conversation_of(db, sid)
    assert db.get_messages(sid)[0]["content"] == text


# --- ordering ----------------------------------------------------------------------------------


def test_order_is_insertion_order_even_when_timestamps_go_backwards(db, sid, raw):
    ids = [db.append_message(sid, "user", t) for t in ("one", "two", "three")]
    for message_id, stamp in zip(ids, (900.0, 500.0, 100.0), strict=True):
        raw.set_message_time(message_id, stamp)
    assert [m["content"] for m in conversation_of(db, sid)] == ["one", "two", "three"]


# --- include_ancestors -------------------------------------------------------------------------


@pytest.fixture
def chain(db, make_session):
    """root -> middle -> tip, each with its own messages, appended in chain order."""
    make_session("root", started=100.0, ended=150.0, reason="compression")
    db.append_message("root", "user", "Plan the trip")
    db.append_message("root", "assistant", "Where to?")
    make_session("middle", started=160.0, parent="root", ended=200.0, reason="compression")
    db.append_message("middle", "user", "Kyoto")
    db.append_message("middle", "assistant", "Great choice.")
    make_session("tip", started=210.0, parent="middle")
    db.append_message("tip", "user", "Book hotels")
    return "tip"


def test_without_ancestors_only_the_session(db, chain):
    assert [m["content"] for m in conversation_of(db, chain)] == ["Book hotels"]


def test_with_ancestors_replays_root_to_tip(db, chain):
    assert [m["content"] for m in conversation_of(db, chain, include_ancestors=True)] == [
        "Plan the trip",
        "Where to?",
        "Kyoto",
        "Great choice.",
        "Book hotels",
    ]


def test_with_ancestors_from_the_middle_stops_there(db, chain):
    assert [m["content"] for m in conversation_of(db, "middle", include_ancestors=True)] == [
        "Plan the trip",
        "Where to?",
        "Kyoto",
        "Great choice.",
    ]


def test_ancestors_of_any_kind_are_followed(db, make_session):
    # A delegate (started while its parent was live) still replays its parent.
    make_session("boss", started=100.0)
    db.append_message("boss", "user", "delegate this")
    make_session("worker", started=110.0, parent="boss")
    db.append_message("worker", "assistant", "on it")
    assert [m["content"] for m in conversation_of(db, "worker", include_ancestors=True)] == [
        "delegate this",
        "on it",
    ]


def test_ancestor_rows_are_ordered_globally_by_insertion(db, make_session):
    make_session("p", started=100.0)
    make_session("c", started=110.0, parent="p")
    db.append_message("c", "assistant", "child first")
    db.append_message("p", "user", "parent later")
    assert [m["content"] for m in conversation_of(db, "c", include_ancestors=True)] == [
        "child first",
        "parent later",
    ]


def test_replayed_prompt_is_dropped_with_ancestors(db, make_session):
    make_session("old", started=100.0, ended=150.0, reason="compression")
    db.append_message("old", "user", "Summarise chapter 3")
    make_session("new", started=160.0, parent="old")
    db.append_message("new", "user", "Summarise chapter 3")
    db.append_message("new", "assistant", "Chapter 3 is about tides.")
    assert conversation_of(db, "new", include_ancestors=True) == [
        {"role": "user", "content": "Summarise chapter 3"},
        {"role": "assistant", "content": "Chapter 3 is about tides."},
    ]
    # Without ancestors nothing is de-duplicated.
    assert len(conversation_of(db, "new")) == 2


def test_replay_dedupe_compares_cleaned_text(db, make_session):
    make_session("old", started=100.0, ended=150.0, reason="compression")
    db.append_message("old", "user", "Next step?")
    make_session("new", started=160.0, parent="old")
    db.append_message("new", "user", "<memory-context>ctx</memory-context>  Next step?  ")
    assert conversation_of(db, "new", include_ancestors=True) == [{"role": "user", "content": "Next step?"}]


def test_tool_and_system_messages_do_not_stop_the_dedupe_scan(db, make_session):
    make_session("old", started=100.0, ended=150.0, reason="compression")
    db.append_message("old", "user", "Run the tests")
    db.append_message("old", "tool", "3 passed", tool_call_id="t1")
    db.append_message("old", "system", "compressed")
    db.append_message("old", "assistant", "")
    make_session("new", started=160.0, parent="old")
    db.append_message("new", "user", "Run the tests")
    assert [(m["role"], m["content"]) for m in conversation_of(db, "new", include_ancestors=True)] == [
        ("user", "Run the tests"),
        ("tool", "3 passed"),
        ("system", "compressed"),
        ("assistant", ""),
    ]


def test_assistant_answer_in_between_keeps_the_repeat(db, make_session):
    make_session("old", started=100.0, ended=150.0, reason="compression")
    db.append_message("old", "user", "Again?")
    db.append_message("old", "assistant", "Sure.")
    make_session("new", started=160.0, parent="old")
    db.append_message("new", "user", "Again?")
    assert [m["content"] for m in conversation_of(db, "new", include_ancestors=True)] == [
        "Again?",
        "Sure.",
        "Again?",
    ]


def test_assistant_tool_call_in_between_keeps_the_repeat(db, make_session):
    make_session("old", started=100.0, ended=150.0, reason="compression")
    db.append_message("old", "user", "Look it up")
    db.append_message("old", "assistant", None, tool_calls=[SEARCH_CALL])
    make_session("new", started=160.0, parent="old")
    db.append_message("new", "user", "Look it up")
    assert [m["role"] for m in conversation_of(db, "new", include_ancestors=True)] == [
        "user",
        "assistant",
        "user",
    ]


def test_empty_user_messages_are_never_deduplicated(db, make_session):
    make_session("old", started=100.0, ended=150.0, reason="compression")
    db.append_message("old", "user", "")
    make_session("new", started=160.0, parent="old")
    db.append_message("new", "user", "   ")
    assert conversation_of(db, "new", include_ancestors=True) == [
        {"role": "user", "content": ""},
        {"role": "user", "content": ""},
    ]


def test_ancestor_walk_survives_a_cycle(db, make_session, raw):
    make_session("x", started=100.0)
    make_session("y", started=110.0, parent="x")
    raw.execute("UPDATE sessions SET parent_session_id = 'y' WHERE id = 'x'")
    db.append_message("x", "user", "from x")
    db.append_message("y", "user", "from y")
    contents = [m["content"] for m in conversation_of(db, "y", include_ancestors=True)]
    assert sorted(contents) == ["from x", "from y"]


# --- upstream head's keys, live rows, id order, background-review prompts --------------------


def test_each_message_carries_its_stored_time(db, sid):
    db.append_message(sid, "user", "Ping", timestamp=1_700_000_000.5)
    db.append_message(sid, "assistant", "Pong", timestamp=1_700_000_001.25)
    stamps = [m["timestamp"] for m in db.get_messages_as_conversation(sid)]
    assert stamps == [1_700_000_000.5, 1_700_000_001.25]


def test_a_zero_time_is_left_out(db, sid, raw):
    message = db.append_message(sid, "user", "Ping")
    raw.set_message_time(message, 0.0)
    assert db.get_messages_as_conversation(sid) == [{"role": "user", "content": "Ping"}]


def test_platform_id_comes_back_as_message_id_and_observed_as_true(db, sid):
    db.append_message(sid, "user", "Seen in the group", platform_message_id="tg-77", observed=True)
    db.append_message(sid, "user", "Addressed", platform_message_id="", observed=False)
    assert conversation_of(db, sid) == [
        {"role": "user", "content": "Seen in the group", "message_id": "tg-77", "observed": True},
        {"role": "user", "content": "Addressed"},
    ]


def test_order_is_insertion_order_even_against_the_clock(db, sid):
    db.append_message(sid, "assistant", None, tool_calls=[SEARCH_CALL], timestamp=2000.0)
    db.append_message(sid, "tool", "found it", tool_call_id="call_s1", timestamp=1000.0)
    assert [m["role"] for m in conversation_of(db, sid)] == ["assistant", "tool"]


def test_ancestor_replay_is_in_id_order_across_sessions(db, make_session):
    make_session("old", started=100.0, ended=150.0, reason="compression")
    make_session("new", started=160.0, parent="old")
    db.append_message("new", "user", "written first, in the child", timestamp=10.0)
    db.append_message("old", "user", "written second, in the parent", timestamp=5.0)
    assert [m["content"] for m in conversation_of(db, "new", include_ancestors=True)] == [
        "written first, in the child",
        "written second, in the parent",
    ]


def test_inactive_rows_are_replayed_only_when_asked(db, sid):
    db.append_message(sid, "user", "keep")
    db.append_message(sid, "assistant", "kept")
    undone = db.append_message(sid, "user", "take back")
    db.append_message(sid, "assistant", "taken back")
    db.rewind_to_message(sid, undone)
    assert [m["content"] for m in conversation_of(db, sid)] == ["keep", "kept"]
    assert [m["content"] for m in conversation_of(db, sid, include_inactive=True)] == [
        "keep",
        "kept",
        "take back",
        "taken back",
    ]


def test_a_file_compacted_by_another_program_replays_only_the_live_set(db, sid, raw):
    # What upstream Hermes leaves after compacting in place: the originals archived
    # (active = 0, compacted = 1) and the surviving tail stored again with its own time.
    db.append_message(sid, "user", "Plan the trip", timestamp=100.0)
    db.append_message(sid, "assistant", None, tool_calls=[SEARCH_CALL], timestamp=101.0)
    db.append_message(sid, "tool", "3 hotels", tool_call_id="call_s1", timestamp=102.0)
    raw.execute("UPDATE messages SET active = 0, compacted = 1 WHERE session_id = ?", (sid,))
    db.append_message(sid, "user", "[summary] a trip is being planned", timestamp=103.0)
    db.append_message(sid, "assistant", None, tool_calls=[SEARCH_CALL], timestamp=101.0)
    db.append_message(sid, "tool", "3 hotels", tool_call_id="call_s1", timestamp=102.0)
    assert [(m["role"], m["content"]) for m in conversation_of(db, sid)] == [
        ("user", "[summary] a trip is being planned"),
        ("assistant", None),
        ("tool", "3 hotels"),
    ]
    rewound = db.append_message(sid, "user", "undone elsewhere")
    raw.execute("UPDATE messages SET active = 0 WHERE id = ?", (rewound,))
    assert len(conversation_of(db, sid)) == 3


@pytest.mark.parametrize(
    "prompt",
    [
        "Review the conversation above and update the skill library. Only use skill tools.",
        "  \n Review the conversation above and consider saving to memory anything durable.",
    ],
)
@pytest.mark.parametrize("role", ["user", "system"])
def test_background_review_prompt_and_its_reply_are_left_out(db, sid, role, prompt):
    db.append_message(sid, "user", "Fix the build")
    db.append_message(sid, role, prompt)
    db.append_message(sid, "assistant", "Saving a skill now.")
    db.append_message(sid, "user", "Did it work?")
    assert [m["content"] for m in conversation_of(db, sid)] == ["Fix the build", "Did it work?"]


def test_review_prompt_needs_the_exact_opening(db, sid):
    db.append_message(sid, "user", "review the conversation above and update the skill library")
    db.append_message(sid, "assistant", "ok")
    db.append_message(sid, "tool", "Review the conversation above and consider saving to memory")
    db.append_message(sid, "assistant", "after a tool")
    assert [m["content"] for m in conversation_of(db, sid)] == [
        "review the conversation above and update the skill library",
        "ok",
        "Review the conversation above and consider saving to memory",
        "after a tool",
    ]


def test_only_an_assistant_reply_right_after_the_prompt_is_dropped(db, sid):
    db.append_message(sid, "user", "Review the conversation above and update the skill library")
    db.append_message(sid, "tool", "a tool result")
    db.append_message(sid, "assistant", "this reply stays")
    db.append_message(sid, "system", "Review the conversation above and consider saving to memory")
    db.append_message(sid, "user", "Review the conversation above and update the skill library")
    db.append_message(sid, "assistant", "this reply goes")
    assert [m["content"] for m in conversation_of(db, sid)] == ["a tool result", "this reply stays"]
