"""Rewind (``/undo``): ``rewind_to_message``, ``restore_rewound`` and
``list_recent_user_messages``, on both backends and both APIs."""

from __future__ import annotations

import threading

import pytest
from support import MESSAGE_COLUMNS


@pytest.fixture
def sid(db):
    return db.create_session("undo-me", "cli")


@pytest.fixture
def turns(db, sid):
    """Two exchanges: ids of user 1, assistant 1, user 2, assistant 2."""
    return [
        db.append_message(sid, "user", "first question"),
        db.append_message(sid, "assistant", "first answer"),
        db.append_message(sid, "user", "second question"),
        db.append_message(sid, "assistant", "second answer"),
    ]


def states(db, session_id):
    return [
        (m["id"], m["active"], m["compacted"]) for m in db.get_messages(session_id, include_inactive=True)
    ]


def rewinds(db, session_id):
    return db.get_session(session_id)["rewind_count"]


# --- rewind_to_message ------------------------------------------------------------------------------


def test_rewind_takes_the_target_and_everything_after_out_of_the_live_context(db, sid, turns):
    result = db.rewind_to_message(sid, turns[2])
    assert set(result) == {"rewound_count", "target_message", "new_head_id"}
    assert result["rewound_count"] == 2
    assert result["new_head_id"] == turns[1]
    assert [m["content"] for m in db.get_messages(sid)] == ["first question", "first answer"]
    assert states(db, sid) == [(turns[0], 1, 0), (turns[1], 1, 0), (turns[2], 0, 0), (turns[3], 0, 0)]
    assert rewinds(db, sid) == 1
    # The counters still count every appended message.
    assert db.get_session(sid)["message_count"] == 4


def test_the_target_is_the_full_row_with_content_decoded(db, sid):
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}]
    target = db.append_message(sid, "user", parts, tool_calls=[{"id": "c"}], platform_message_id="p-1")
    row = db.rewind_to_message(sid, target)["target_message"]
    assert set(row) == MESSAGE_COLUMNS
    assert (row["id"], row["session_id"], row["role"], row["content"]) == (target, sid, "user", parts)
    assert row["tool_calls"] == '[{"id": "c"}]'  # as stored: JSON text
    assert row["platform_message_id"] == "p-1"


def test_rewinding_to_the_first_message_leaves_no_head(db, sid, turns):
    result = db.rewind_to_message(sid, turns[0])
    assert (result["rewound_count"], result["new_head_id"]) == (4, None)
    assert db.get_messages(sid) == []


def test_rewinding_again_changes_no_row_but_counts(db, sid, turns):
    db.rewind_to_message(sid, turns[2])
    again = db.rewind_to_message(sid, turns[2])
    assert (again["rewound_count"], again["new_head_id"]) == (0, turns[1])
    assert rewinds(db, sid) == 2


def test_compaction_archived_rows_keep_their_state(db, sid, turns):
    db.archive_and_compact(
        sid, [{"role": "user", "content": "summary"}, {"role": "assistant", "content": "ok"}]
    )
    summary, reply = (m["id"] for m in db.get_messages(sid))
    result = db.rewind_to_message(sid, summary)
    assert result["rewound_count"] == 2
    assert states(db, sid)[:4] == [(turn, 0, 1) for turn in turns]
    assert states(db, sid)[4:] == [(summary, 0, 0), (reply, 0, 0)]


@pytest.mark.parametrize("role", ["assistant", "tool", "system"])
def test_a_target_that_is_not_a_user_message_is_refused(db, sid, turns, role):
    other = db.append_message(sid, role, "not a prompt")
    with pytest.raises(ValueError) as raised:
        db.rewind_to_message(sid, other)
    assert str(raised.value) == f"rewind target must be a 'user' message (got role='{role}', id={other})"
    assert states(db, sid)[-1] == (other, 1, 0)
    assert rewinds(db, sid) == 0


def test_a_target_of_another_session_or_none_is_refused(db, sid, turns):
    db.create_session("other", "cli")
    theirs = db.append_message("other", "user", "theirs")
    for missing in (theirs, 999_999):
        with pytest.raises(ValueError) as raised:
            db.rewind_to_message(sid, missing)
        assert str(raised.value) == f"message {missing} not found in session {sid}"
    with pytest.raises(ValueError, match="not found in session absent"):
        db.rewind_to_message("absent", turns[0])
    assert rewinds(db, sid) == 0
    assert [active for _, active, _ in states(db, "other")] == [1]


def test_a_target_id_that_is_not_an_int_is_refused(db, sid, turns):
    with pytest.raises(TypeError):
        db.rewind_to_message(sid, str(turns[0]))


def test_concurrent_rewinds_each_count_and_agree(db, sid, turns):
    results: list[dict] = []

    def rewind() -> None:
        results.append(db.rewind_to_message(sid, turns[2]))

    threads = [threading.Thread(target=rewind) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(result["rewound_count"] for result in results) == [0, 0, 0, 2]
    assert rewinds(db, sid) == 4


# --- restore_rewound -------------------------------------------------------------------------------


def test_restore_brings_rewound_rows_back(db, sid, turns):
    db.rewind_to_message(sid, turns[2])
    assert db.restore_rewound(sid, turns[2]) == 2
    assert [m["id"] for m in db.get_messages(sid)] == turns
    assert db.restore_rewound(sid, turns[0]) == 0
    assert db.get_session(sid)["message_count"] == 4


def test_restore_only_from_the_given_id(db, sid, turns):
    db.rewind_to_message(sid, turns[0])
    assert db.restore_rewound(sid, turns[3]) == 1
    assert [m["id"] for m in db.get_messages(sid)] == [turns[3]]


def test_restore_also_revives_compaction_archived_rows(db, sid, turns):
    db.archive_and_compact(sid, [{"role": "user", "content": "summary"}])
    assert db.restore_rewound(sid, turns[0]) == 4
    assert [(m["content"], m["compacted"]) for m in db.get_messages(sid)][:2] == [
        ("first question", 1),
        ("first answer", 1),
    ]
    assert len(db.get_messages(sid)) == 5


def test_restore_leaves_other_sessions_alone(db, sid, turns):
    db.create_session("other", "cli")
    theirs = db.append_message("other", "user", "theirs")
    db.rewind_to_message("other", theirs)
    db.rewind_to_message(sid, turns[0])
    assert db.restore_rewound(sid, 0) == 4
    assert db.get_messages("other") == []


# --- list_recent_user_messages --------------------------------------------------------------------


def test_recent_user_messages_newest_first(db, sid, turns):
    listed = db.list_recent_user_messages(sid)
    assert [item["id"] for item in listed] == [turns[2], turns[0]]
    assert set(listed[0]) == {"id", "timestamp", "preview"}
    assert listed[0]["preview"] == "second question"
    assert isinstance(listed[0]["timestamp"], float)


def test_recent_user_messages_limit(db, sid):
    ids = [db.append_message(sid, "user", f"prompt {n}") for n in range(5)]
    assert [item["id"] for item in db.list_recent_user_messages(sid, limit=2)] == ids[:2:-1][:2]
    assert db.list_recent_user_messages(sid, limit=0) == []
    assert len(db.list_recent_user_messages(sid, limit=-1)) == 5


def test_recent_user_messages_skip_rewound_ones_unless_asked(db, sid, turns):
    db.rewind_to_message(sid, turns[2])
    assert [item["id"] for item in db.list_recent_user_messages(sid)] == [turns[0]]
    assert [item["id"] for item in db.list_recent_user_messages(sid, include_inactive=True)] == [
        turns[2],
        turns[0],
    ]


@pytest.mark.parametrize(
    ("content", "preview"),
    [
        ("  two\n\nlines\tand   spaces ", "two lines and spaces"),
        ("x" * 80, "x" * 80),
        ("y" * 81, "y" * 77 + "..."),
        (
            [{"type": "text", "text": "caption"}, {"type": "image_url"}, {"type": "text", "text": "more"}],
            "caption more",
        ),
        ([{"type": "image_url", "image_url": {"url": "data:"}}], "[multimodal content]"),
        (None, ""),
        ({"not": "text"}, ""),
    ],
    ids=["whitespace", "80", "81", "text-parts", "image-only", "none", "dict"],
)
def test_recent_user_message_preview(db, sid, content, preview):
    db.append_message(sid, "user", content)
    assert db.list_recent_user_messages(sid)[0]["preview"] == preview
