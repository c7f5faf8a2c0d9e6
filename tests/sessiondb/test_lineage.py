"""Lineage helpers: get_compression_tip, resolve_resume_session_id, and the title a
continuation takes over from the session it continues."""

from __future__ import annotations

import pytest

BRANCH = {"_branched_from": "parent"}
DELEGATE = {"_delegate_from": "parent"}

# --- get_compression_tip -----------------------------------------------------------------------


def test_tip_of_a_session_without_children_is_itself(db, make_session):
    make_session("solo", started=100.0)
    assert db.get_compression_tip("solo") == "solo"


def test_tip_of_a_missing_session_is_the_input(db):
    assert db.get_compression_tip("does-not-exist") == "does-not-exist"


def test_tip_follows_one_continuation(db, make_session):
    make_session("a", started=100.0, ended=200.0, reason="compression")
    make_session("b", started=201.0, parent="a")
    assert db.get_compression_tip("a") == "b"
    assert db.get_compression_tip("b") == "b"


def test_tip_follows_a_chain(db, make_session):
    make_session("a", started=100.0, ended=200.0, reason="compression")
    make_session("b", started=200.5, parent="a", ended=300.0, reason="compression")
    make_session("c", started=300.5, parent="b", ended=400.0, reason="compression")
    make_session("d", started=400.5, parent="c")
    assert db.get_compression_tip("a") == "d"
    assert db.get_compression_tip("c") == "d"


def test_child_starting_exactly_at_the_end_is_a_continuation(db, make_session):
    make_session("a", started=100.0, ended=200.0, reason="compression")
    make_session("b", started=200.0, parent="a")
    assert db.get_compression_tip("a") == "b"


def test_child_started_before_the_end_is_still_a_continuation(db, make_session):
    # A racing continuation can be written before its parent's ended_at: no timing test.
    make_session("a", started=100.0, ended=200.0, reason="compression")
    make_session("early", started=150.0, parent="a")
    assert db.get_compression_tip("a") == "early"


@pytest.mark.parametrize(
    ("kind", "extra"),
    [
        ("branch", {"model_config": BRANCH}),
        ("delegate", {"model_config": DELEGATE}),
        ("tool run", {"source": "tool"}),
    ],
)
def test_tip_never_follows_a_branch_delegate_or_tool_child(db, make_session, kind, extra):
    make_session("a", started=100.0, ended=200.0, reason="compression")
    make_session("other", started=300.0, parent="a", **extra)
    assert db.get_compression_tip("a") == "a", kind


def test_tip_prefers_a_child_that_continues_the_chain_then_a_live_one(db, make_session, raw):
    make_session("a", started=100.0, ended=200.0, reason="compression")
    make_session("reaped", started=400.0, parent="a", ended=500.0, reason="ws_orphan_reap")
    raw.set_message_time(db.append_message("reaped", "user", "stale"), 9000.0)
    make_session("live", started=300.0, parent="a")
    assert db.get_compression_tip("a") == "live"
    make_session("compressed", started=250.0, parent="a", ended=260.0, reason="compression")
    assert db.get_compression_tip("a") == "compressed"


def test_tip_ranks_equal_children_by_latest_activity_then_start_then_id(db, make_session, raw):
    make_session("a", started=100.0, ended=200.0, reason="compression")
    make_session("quiet-late", started=400.0, parent="a")
    make_session("busy-early", started=300.0, parent="a")
    raw.set_message_time(db.append_message("busy-early", "user", "x"), 500.0)
    assert db.get_compression_tip("a") == "busy-early"
    make_session("same-b", started=600.0, parent="a")
    make_session("same-c", started=600.0, parent="a")
    assert db.get_compression_tip("a") == "same-c"


def test_tip_walk_stops_at_a_cycle(db, make_session, raw):
    make_session("x", started=100.0, ended=150.0, reason="compression")
    make_session("y", started=200.0, parent="x", ended=250.0, reason="compression")
    raw.execute("UPDATE sessions SET parent_session_id = 'y' WHERE id = 'x'")
    assert db.get_compression_tip("x") == "y"
    assert db.get_compression_tip("y") == "x"


def test_invalid_json_never_fails_the_walk(db, make_session, raw):
    make_session("a", started=100.0, ended=200.0, reason="compression")
    make_session("b", started=300.0, parent="a")
    raw.execute("UPDATE sessions SET model_config = ? WHERE id = 'b'", ("{not json",))
    assert db.get_compression_tip("a") == "b"
    raw.execute("UPDATE sessions SET model_config = ? WHERE id = 'b'", ('{"_delegate_from": "a",',))
    # SQLite parses only valid JSON, so that text carries no marker; PostgreSQL 15 cannot
    # test validity in SQL and recognises the marker in the text (markers.py).
    assert db.get_compression_tip("a") == ("a" if raw.postgres else "b")


def test_a_null_marker_is_no_marker(db, make_session):
    make_session("a", started=100.0, ended=200.0, reason="compression")
    make_session("b", started=300.0, parent="a", model_config={"_branched_from": None, "x": 1})
    assert db.get_compression_tip("a") == "b"


def test_children_of_non_compression_ends_are_ignored(db, make_session):
    make_session("branched", started=100.0, ended=200.0, reason="branched")
    make_session("branch", started=250.0, parent="branched")
    make_session("exited", started=300.0, ended=400.0, reason="user_exit")
    make_session("after-exit", started=450.0, parent="exited")
    make_session("live", started=500.0)
    make_session("sub", started=550.0, parent="live")
    assert db.get_compression_tip("branched") == "branched"
    assert db.get_compression_tip("exited") == "exited"
    assert db.get_compression_tip("live") == "live"


def test_tip_picks_the_latest_started_continuation(db, make_session):
    make_session("a", started=100.0, ended=200.0, reason="compression")
    make_session("early", started=210.0, parent="a")
    make_session("late", started=220.0, parent="a")
    make_session("middle", started=215.0, parent="a")
    assert db.get_compression_tip("a") == "late"


def test_tip_stops_at_a_branch_inside_the_chain(db, make_session):
    make_session("a", started=100.0, ended=200.0, reason="compression")
    make_session("b", started=201.0, parent="a", ended=300.0, reason="branched")
    make_session("c", started=301.0, parent="b")
    assert db.get_compression_tip("a") == "b"


def test_delegate_of_a_continuation_is_not_followed(db, make_session):
    make_session("a", started=100.0, ended=200.0, reason="compression")
    make_session("b", started=201.0, parent="a", ended=300.0, reason="compression")
    make_session("b-helper", started=250.0, parent="b", model_config={"_delegate_from": "b"})
    assert db.get_compression_tip("a") == "b"


def test_tip_walk_is_bounded_to_one_hundred_steps(db, make_session):
    for index in range(105):
        parent = f"n{index - 1:03d}" if index else None
        make_session(
            f"n{index:03d}",
            started=10.0 * index + 1,
            parent=parent,
            ended=10.0 * index + 5,
            reason="compression",
        )
    assert db.get_compression_tip("n000") == "n100"
    assert db.get_compression_tip("n010") == "n104"


# --- resolve_resume_session_id -----------------------------------------------------------------


def test_resume_falsy_input_is_returned_as_is(db):
    assert db.resolve_resume_session_id("") == ""
    assert db.resolve_resume_session_id(None) is None


def test_resume_session_with_messages_goes_to_a_descendant_with_messages(db, make_session):
    make_session("a", started=100.0, ended=200.0, reason="compression")
    db.append_message("a", "user", "hi")
    make_session("b", started=201.0, parent="a")
    db.append_message("b", "user", "continued")
    assert db.resolve_resume_session_id("a") == "b"


def test_resume_of_a_live_parent_with_messages_follows_an_untagged_child(db, make_session):
    make_session("a", started=100.0)
    db.append_message("a", "user", "old")
    make_session("b", started=110.0, parent="a")
    db.append_message("b", "user", "new")
    assert db.resolve_resume_session_id("a") == "b"


def test_resume_keeps_the_deepest_session_with_messages(db, make_session):
    make_session("a", started=100.0)
    make_session("b", started=110.0, parent="a")
    db.append_message("b", "user", "here")
    make_session("c", started=120.0, parent="b")
    assert db.resolve_resume_session_id("a") == "b"


@pytest.mark.parametrize(
    "extra",
    [{"model_config": BRANCH}, {"model_config": DELEGATE}, {"source": "tool"}],
    ids=["branch", "delegate", "tool"],
)
def test_resume_never_follows_a_branch_delegate_or_tool_child(db, make_session, extra):
    make_session("parent", started=100.0)
    db.append_message("parent", "user", "mine")
    make_session("other", started=110.0, parent="parent", **extra)
    db.append_message("other", "user", "theirs")
    assert db.resolve_resume_session_id("parent") == "parent"


def test_resume_starts_from_the_compression_tip(db, make_session, raw):
    # The real continuation was written before the root's end; a stale sibling was reaped.
    make_session("root", started=100.0, ended=1000.0, reason="compression", source="tui")
    db.append_message("root", "user", "before")
    make_session("real", started=500.0, parent="root", ended=2000.0, reason="compression", source="tui")
    db.append_message("real", "user", "continued")
    make_session("orphan", started=1000.0, parent="root", ended=3000.0, reason="ws_orphan_reap", source="tui")
    db.append_message("orphan", "user", "stale")
    make_session("live", started=2000.0, parent="real", source="tui")
    db.append_message("live", "user", "latest")
    assert db.get_compression_tip("root") == "live"
    assert db.resolve_resume_session_id("root") == "live"
    listed = {row["id"] for row in db.list_sessions_rich(limit=10, order_by_last_active=True)}
    assert listed == {"live"}


def test_resume_redirects_to_child_with_messages(db, make_session):
    make_session("a", started=100.0, ended=200.0, reason="compression")
    make_session("b", started=201.0, parent="a")
    db.append_message("b", "user", "landed here")
    assert db.resolve_resume_session_id("a") == "b"


def test_resume_walks_through_empty_descendants(db, make_session):
    make_session("a", started=100.0, ended=200.0, reason="compression")
    make_session("b", started=201.0, parent="a", ended=300.0, reason="compression")
    make_session("c", started=301.0, parent="b")
    db.append_message("c", "assistant", "deep")
    assert db.resolve_resume_session_id("a") == "c"


def test_resume_follows_children_of_any_kind(db, make_session):
    make_session("live", started=100.0)
    make_session("delegate", started=110.0, parent="live")
    db.append_message("delegate", "user", "x")
    assert db.resolve_resume_session_id("live") == "delegate"


def test_resume_takes_only_the_latest_started_child(db, make_session):
    make_session("a", started=100.0)
    make_session("older", started=110.0, parent="a")
    db.append_message("older", "user", "has messages")
    make_session("newer", started=120.0, parent="a")
    assert db.resolve_resume_session_id("a") == "a"
    db.append_message("newer", "user", "now this one")
    assert db.resolve_resume_session_id("a") == "newer"


def test_resume_child_ties_break_on_id_descending(db, make_session):
    make_session("a", started=100.0)
    make_session("child-1", started=110.0, parent="a")
    make_session("child-2", started=110.0, parent="a")
    db.append_message("child-1", "user", "one")
    db.append_message("child-2", "user", "two")
    assert db.resolve_resume_session_id("a") == "child-2"


def test_resume_without_messages_anywhere_returns_input(db, make_session):
    make_session("a", started=100.0)
    make_session("b", started=110.0, parent="a")
    assert db.resolve_resume_session_id("a") == "a"


def test_resume_of_missing_session_returns_input(db):
    assert db.resolve_resume_session_id("ghost") == "ghost"


def test_resume_survives_a_cycle(db, make_session, raw):
    make_session("x", started=100.0)
    make_session("y", started=110.0, parent="x")
    raw.execute("UPDATE sessions SET parent_session_id = 'y' WHERE id = 'x'")
    assert db.resolve_resume_session_id("x") == "x"
    db.append_message("y", "user", "in the loop")
    assert db.resolve_resume_session_id("x") == "y"


def build_empty_chain(make_session, length):
    for index in range(length + 1):
        parent = f"L{index - 1:02d}" if index else None
        make_session(f"L{index:02d}", started=100.0 + index, parent=parent)


def test_resume_looks_at_thirty_two_sessions(db, make_session):
    # The start and 31 sessions below it.
    build_empty_chain(make_session, 31)
    db.append_message("L31", "user", "bottom")
    assert db.resolve_resume_session_id("L00") == "L31"


def test_resume_looks_no_further_than_thirty_two_sessions(db, make_session):
    build_empty_chain(make_session, 32)
    db.append_message("L32", "user", "too deep")
    assert db.resolve_resume_session_id("L00") == "L00"
    assert db.resolve_resume_session_id("L01") == "L32"


def test_resume_returns_the_input_when_a_read_fails(db, make_session, raw):
    # A child id that is not UTF-8 (damaged text): reading it raises the store's own
    # CorruptDatabase; upstream returns the input whenever a query fails.
    raw.sqlite_only("text that is not UTF-8")
    make_session("parent", started=100.0)
    raw.execute(
        "INSERT INTO sessions (id, source, started_at, parent_session_id) "
        "VALUES (CAST(X'FFFE' AS TEXT), 'cli', 110.0, 'parent')"
    )
    assert db.resolve_resume_session_id("parent") == "parent"


# --- a continuation takes its ancestor's title ------------------------------------------------


def build_compressed_pair(make_session):
    make_session("root", started=100.0, ended=200.0, reason="compression")
    make_session("mid", started=150.0, parent="root", ended=300.0, reason="compression")
    make_session("tip", started=310.0, parent="mid")


def test_title_moves_from_a_compression_ancestor(db, make_session):
    build_compressed_pair(make_session)
    db.set_session_title("root", "Trip")
    assert db.set_session_title("tip", "Trip") is True
    assert db.get_session_title("tip") == "Trip"
    assert db.get_session_title("root") is None
    assert db.get_session_by_title("Trip")["id"] == "tip"


def test_title_moves_from_the_direct_parent(db, make_session):
    build_compressed_pair(make_session)
    db.set_session_title("mid", "Trip")
    db.set_session_title("tip", "Trip")
    assert (db.get_session_title("mid"), db.get_session_title("tip")) == (None, "Trip")


def test_title_of_a_descendant_is_not_taken(db, make_session):
    build_compressed_pair(make_session)
    db.set_session_title("tip", "Trip")
    with pytest.raises(ValueError, match="already in use by session tip"):
        db.set_session_title("root", "Trip")
    assert db.get_session_title("tip") == "Trip"


@pytest.mark.parametrize("reason", ["branched", "user_exit", None])
def test_title_of_a_parent_that_did_not_end_by_compression_is_not_taken(db, make_session, reason):
    make_session("parent", started=100.0, ended=200.0 if reason else None, reason=reason)
    make_session("child", started=300.0, parent="parent")
    db.set_session_title("parent", "Kept")
    with pytest.raises(ValueError, match="already in use by session parent"):
        db.set_session_title("child", "Kept")
    assert db.get_session_title("parent") == "Kept"


def test_title_of_an_unrelated_session_still_conflicts(db, make_session):
    build_compressed_pair(make_session)
    make_session("stranger", started=50.0)
    db.set_session_title("stranger", "Mine")
    with pytest.raises(ValueError, match="already in use by session stranger"):
        db.set_session_title("tip", "Mine")


def test_title_transfer_survives_a_cycle(db, make_session, raw):
    make_session("x", started=100.0, ended=150.0, reason="compression")
    make_session("y", started=200.0, parent="x", ended=250.0, reason="compression")
    raw.execute("UPDATE sessions SET parent_session_id = 'y' WHERE id = 'x'")
    db.set_session_title("x", "Loop")
    db.set_session_title("y", "Loop")
    assert (db.get_session_title("x"), db.get_session_title("y")) == (None, "Loop")
