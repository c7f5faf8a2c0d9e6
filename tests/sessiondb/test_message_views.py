"""Views around a message: ``get_messages_around``, ``get_anchored_view`` and
``has_platform_message_id``, on both backends and both APIs."""

from __future__ import annotations

import pytest

CALL = {"id": "t1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


def seed(db, session_id="s1", count=10, text="line"):
    """A session of ``count`` alternating user/assistant messages; their ids, in order."""
    db.create_session(session_id, "cli")
    return [
        db.append_message(session_id, "user" if n % 2 == 0 else "assistant", f"{text} {n}")
        for n in range(count)
    ]


def ids_of(rows):
    return [row["id"] for row in rows]


# --- get_messages_around -----------------------------------------------------------------------------


def test_window_either_side_of_the_anchor(db):
    ids = seed(db)
    view = db.get_messages_around("s1", ids[5], window=2)
    assert set(view) == {"window", "messages_before", "messages_after"}
    assert ids_of(view["window"]) == ids[3:8]
    assert (view["messages_before"], view["messages_after"]) == (2, 2)
    assert view["window"][2]["content"] == "line 5"


@pytest.mark.parametrize("window", [0, -3])
def test_no_window_gives_the_anchor_alone(db, window):
    ids = seed(db, count=5)
    view = db.get_messages_around("s1", ids[2], window=window)
    assert ids_of(view["window"]) == [ids[2]]
    assert (view["messages_before"], view["messages_after"]) == (0, 0)


def test_counts_fall_short_at_the_ends(db):
    ids = seed(db)
    at_start = db.get_messages_around("s1", ids[0], window=5)
    assert (len(at_start["window"]), at_start["messages_before"], at_start["messages_after"]) == (6, 0, 5)
    at_end = db.get_messages_around("s1", ids[-1], window=5)
    assert (len(at_end["window"]), at_end["messages_before"], at_end["messages_after"]) == (6, 5, 0)
    everything = db.get_messages_around("short", seed(db, "short", 3)[1], window=50)
    assert (len(everything["window"]), everything["messages_before"], everything["messages_after"]) == (
        3,
        1,
        1,
    )


def test_default_window_is_five(db):
    ids = seed(db, count=20)
    assert ids_of(db.get_messages_around("s1", ids[10])["window"]) == ids[5:16]


def test_anchor_missing_or_of_another_session_gives_an_empty_view(db):
    first = seed(db, "s1", 5)
    seed(db, "s2", 5)
    empty = {"window": [], "messages_before": 0, "messages_after": 0}
    assert db.get_messages_around("s1", 99_999) == empty
    assert db.get_messages_around("s2", first[2], window=2) == empty
    assert db.get_messages_around("absent", first[2]) == empty


def test_scrolling_forward_and_back_by_re_anchoring(db):
    ids = seed(db, count=20)
    middle = db.get_messages_around("s1", ids[10], window=3)
    forward = db.get_messages_around("s1", middle["window"][-1]["id"], window=3)
    backward = db.get_messages_around("s1", middle["window"][0]["id"], window=3)
    assert ids_of(forward["window"]) == ids[10:17]
    assert ids_of(backward["window"]) == ids[4:11]


def test_rows_are_decoded_full_rows(db):
    db.create_session("s1", "cli")
    parts = [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "u"}}]
    db.append_message("s1", "user", parts)
    db.append_message("s1", "assistant", "", tool_calls=[CALL])
    anchor = db.append_message("s1", "tool", "found", tool_name="lookup")
    user, assistant, tool = db.get_messages_around("s1", anchor, window=2)["window"]
    assert user["content"] == parts
    assert assistant["tool_calls"] == [CALL]
    assert tool["tool_name"] == "lookup"
    assert {"active", "compacted", "platform_message_id", "observed"} <= set(tool)


def test_rewound_and_archived_rows_are_in_the_window(db):
    ids = seed(db, count=6)
    db.rewind_to_message("s1", ids[4])
    db.archive_and_compact("s1", [{"role": "user", "content": "summary"}])
    view = db.get_messages_around("s1", ids[2], window=10)
    assert [(row["active"], row["compacted"]) for row in view["window"]] == [(0, 1)] * 4 + [(0, 0)] * 2 + [
        (1, 0)
    ]


def test_a_message_id_that_is_not_an_int_is_refused(db):
    seed(db, count=2)
    with pytest.raises(TypeError):
        db.get_messages_around("s1", "1")


# --- get_anchored_view ------------------------------------------------------------------------------


def test_window_and_both_bookends(db):
    ids = seed(db, count=30)
    view = db.get_anchored_view("s1", ids[15], window=3, bookend=3)
    assert set(view) == {"window", "messages_before", "messages_after", "bookend_start", "bookend_end"}
    assert ids_of(view["window"]) == ids[12:19]
    assert (view["messages_before"], view["messages_after"]) == (3, 3)
    assert ids_of(view["bookend_start"]) == ids[:3]
    assert ids_of(view["bookend_end"]) == ids[-3:]


def test_bookends_never_overlap_the_window(db):
    ids = seed(db)
    near_start = db.get_anchored_view("s1", ids[1], window=3, bookend=3)
    assert near_start["bookend_start"] == []
    assert ids_of(near_start["bookend_end"]) == ids[-3:]
    near_end = db.get_anchored_view("s1", ids[-2], window=3, bookend=3)
    assert near_end["bookend_end"] == []
    assert ids_of(near_end["bookend_start"]) == ids[:3]
    whole = db.get_anchored_view("s1", ids[5], window=10, bookend=3)
    assert (whole["bookend_start"], whole["bookend_end"], len(whole["window"])) == ([], [], 10)


def test_bookends_stop_at_the_window(db):
    ids = seed(db)
    view = db.get_anchored_view("s1", ids[4], window=2, bookend=5)
    assert ids_of(view["bookend_start"]) == ids[:2]
    assert ids_of(view["bookend_end"]) == ids[7:]


@pytest.mark.parametrize("bookend", [0, -2])
def test_no_bookends(db, bookend):
    ids = seed(db, count=20)
    view = db.get_anchored_view("s1", ids[10], window=2, bookend=bookend)
    assert (view["bookend_start"], view["bookend_end"]) == ([], [])
    assert len(view["window"]) == 5


def test_window_keeps_user_and_assistant_and_always_the_anchor(db):
    db.create_session("s1", "cli")
    prompts = []
    for n in range(5):
        prompts.append(db.append_message("s1", "user", f"u{n}"))
        db.append_message("s1", "tool", f"tool output {n}", tool_name="x")
    view = db.get_anchored_view("s1", prompts[2], window=5, bookend=0)
    assert {row["role"] for row in view["window"]} == {"user"}
    # The counts are those of the unfiltered window.
    assert (view["messages_before"], view["messages_after"]) == (4, 5)
    tool_anchor = prompts[2] + 1
    assert tool_anchor in ids_of(db.get_anchored_view("s1", tool_anchor, window=1, bookend=0)["window"])


def test_keep_roles_none_keeps_every_role(db):
    db.create_session("s1", "cli")
    anchor = db.append_message("s1", "user", "ask")
    db.append_message("s1", "tool", "output", tool_name="x")
    for n in range(6):
        db.append_message("s1", "tool", f"late tool {n}", tool_name="x")
    view = db.get_anchored_view("s1", anchor, window=1, bookend=2, keep_roles=None)
    assert [row["role"] for row in view["window"]] == ["user", "tool"]
    assert [row["content"] for row in view["bookend_end"]] == ["late tool 4", "late tool 5"]


def test_custom_roles_apply_to_window_and_bookends(db):
    db.create_session("s1", "cli")
    for n in range(4):
        db.append_message("s1", "system", f"sys {n}")
        db.append_message("s1", "user", f"user {n}")
    anchor = db.append_message("s1", "user", "anchor")
    for n in range(4):
        db.append_message("s1", "system", f"late sys {n}")
    view = db.get_anchored_view("s1", anchor, window=1, bookend=2, keep_roles=["system"])
    # "user 3" is outside keep_roles; the anchor stays whatever its role.
    assert [row["content"] for row in view["window"]] == ["anchor", "late sys 0"]
    assert [row["content"] for row in view["bookend_start"]] == ["sys 0", "sys 1"]
    assert [row["content"] for row in view["bookend_end"]] == ["late sys 2", "late sys 3"]


def test_bookends_skip_messages_without_content(db):
    db.create_session("s1", "cli")
    opener = db.append_message("s1", "user", "Let's start the work")
    db.append_message("s1", "assistant", "", tool_calls=[CALL])
    db.append_message("s1", "assistant", None, tool_calls=[CALL])
    db.append_message("s1", "assistant", [], tool_calls=[CALL])
    for n in range(20):
        db.append_message("s1", "user" if n % 2 == 0 else "assistant", f"prose {n}")
    db.append_message("s1", "assistant", "", tool_calls=[CALL])
    closer = db.append_message("s1", "assistant", "Final decision: ship it.")
    db.append_message("s1", "assistant", {}, tool_calls=[CALL])
    view = db.get_anchored_view("s1", opener + 15, window=2, bookend=3)
    assert [row["content"] for row in view["bookend_start"]] == ["Let's start the work", "prose 0", "prose 1"]
    assert [row["content"] for row in view["bookend_end"]] == [
        "prose 18",
        "prose 19",
        "Final decision: ship it.",
    ]
    assert view["bookend_end"][-1]["id"] == closer


def test_multimodal_messages_count_as_content_for_bookends(db):
    db.create_session("s1", "cli")
    photo = [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": "u"}}]
    opener = db.append_message("s1", "user", photo)
    for n in range(10):
        db.append_message("s1", "assistant", f"prose {n}")
    closer = db.append_message("s1", "user", [{"type": "image_url", "image_url": {"url": "v"}}])
    view = db.get_anchored_view("s1", opener + 5, window=1, bookend=1)
    assert [row["content"] for row in view["bookend_start"]] == [photo]
    assert ids_of(view["bookend_end"]) == [closer]


def test_missing_anchor_gives_an_empty_view(db):
    seed(db)
    assert db.get_anchored_view("s1", 999_999) == {
        "window": [],
        "messages_before": 0,
        "messages_after": 0,
        "bookend_start": [],
        "bookend_end": [],
    }


def test_bookends_come_from_the_anchor_session_only(db):
    first = seed(db, "s1", 20)
    seed(db, "s2", 20)
    view = db.get_anchored_view("s1", first[10], window=2, bookend=3)
    assert {row["session_id"] for row in view["bookend_start"] + view["bookend_end"]} == {"s1"}


def test_anchored_view_includes_inactive_rows(db):
    ids = seed(db, count=20)
    db.rewind_to_message("s1", ids[18])
    view = db.get_anchored_view("s1", ids[10], window=2, bookend=2)
    assert ids_of(view["bookend_end"]) == ids[18:]


# --- has_platform_message_id -------------------------------------------------------------------------


def test_has_platform_message_id(db):
    db.create_session("s1", "cli")
    db.create_session("s2", "cli")
    db.append_message("s1", "user", "hi", platform_message_id="upd-1")
    db.append_message("s1", "user", "numbered", platform_message_id=42)
    assert db.has_platform_message_id("s1", "upd-1") is True
    assert db.has_platform_message_id("s1", "42") is True
    assert db.has_platform_message_id("s1", 42) is True
    assert db.has_platform_message_id("s1", "upd-2") is False
    assert db.has_platform_message_id("s2", "upd-1") is False
    assert db.has_platform_message_id("s1", None) is False
    assert db.has_platform_message_id("absent", "upd-1") is False


def test_has_platform_message_id_sees_inactive_rows(db):
    db.create_session("s1", "cli")
    target = db.append_message("s1", "user", "hi", platform_message_id="upd-1")
    db.rewind_to_message("s1", target)
    assert db.has_platform_message_id("s1", "upd-1") is True
