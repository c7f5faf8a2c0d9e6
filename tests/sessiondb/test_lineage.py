"""Lineage helpers: get_compression_tip and resolve_resume_session_id."""

from __future__ import annotations

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


def test_child_started_before_the_end_is_a_delegate_not_a_continuation(db, make_session):
    make_session("a", started=100.0, ended=200.0, reason="compression")
    make_session("helper", started=150.0, parent="a")
    assert db.get_compression_tip("a") == "a"


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
    make_session("b-helper", started=250.0, parent="b")
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


def test_resume_session_with_messages_is_itself(db, make_session):
    make_session("a", started=100.0, ended=200.0, reason="compression")
    db.append_message("a", "user", "hi")
    make_session("b", started=201.0, parent="a")
    db.append_message("b", "user", "continued")
    assert db.resolve_resume_session_id("a") == "a"


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


def build_empty_chain(make_session, length):
    for index in range(length + 1):
        parent = f"L{index - 1:02d}" if index else None
        make_session(f"L{index:02d}", started=100.0 + index, parent=parent)


def test_resume_reaches_depth_thirty_two(db, make_session):
    build_empty_chain(make_session, 32)
    db.append_message("L32", "user", "bottom")
    assert db.resolve_resume_session_id("L00") == "L32"


def test_resume_stops_after_depth_thirty_two(db, make_session):
    build_empty_chain(make_session, 33)
    db.append_message("L33", "user", "too deep")
    assert db.resolve_resume_session_id("L00") == "L00"
    assert db.resolve_resume_session_id("L01") == "L33"


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
