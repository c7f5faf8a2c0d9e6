"""set_session_archived: hiding a whole conversation from lists, and bringing it back."""

from __future__ import annotations

import pytest


def archived(db, *session_ids):
    return [db.get_session(session_id)["archived"] for session_id in session_ids]


def test_archive_and_restore_one_session(db, make_session):
    make_session("s1", started=100.0)
    db.append_message("s1", "user", "hello")
    assert db.set_session_archived("s1", True) is True
    assert archived(db, "s1") == [1]
    assert db.list_sessions_rich() == []
    assert db.session_count() == 0
    assert db.message_count("s1") == 1  # nothing is deleted
    assert db.set_session_archived("s1", False) is True
    assert archived(db, "s1") == [0]
    assert [row["id"] for row in db.list_sessions_rich()] == ["s1"]


def test_missing_session_returns_false(db):
    assert db.set_session_archived("nope", True) is False
    assert db.set_session_archived("nope", False) is False


def test_setting_the_same_value_again_still_returns_true(db, make_session):
    make_session("s1", started=100.0)
    assert db.set_session_archived("s1", False) is True
    db.set_session_archived("s1", True)
    assert db.set_session_archived("s1", True) is True


def test_any_truthy_value_archives(db, make_session):
    make_session("s1", started=100.0)
    db.set_session_archived("s1", 1)
    assert archived(db, "s1") == [1]
    db.set_session_archived("s1", "")
    assert archived(db, "s1") == [0]


def build_conversation(make_session):
    # root -compression-> mid -compression-> tip, plus children of several kinds.
    make_session("root", started=100.0, ended=200.0, reason="compression")
    make_session("mid", started=150.0, parent="root", ended=300.0, reason="compression")
    make_session("tip", started=310.0, parent="mid")
    make_session("root-delegate", started=120.0, parent="root", model_config={"_delegate_from": "root"})
    make_session("tip-delegate", started=320.0, parent="tip", model_config={"_delegate_from": "tip"})
    make_session("unrelated", started=50.0)


@pytest.mark.parametrize("start", ["root", "mid", "tip"])
def test_the_whole_compression_lineage_follows(db, make_session, start):
    build_conversation(make_session)
    assert db.set_session_archived(start, True) is True
    # Up through compression-ended parents, and down from the session itself through
    # every child of a compression-ended session, whatever kind of child; not below a
    # session that did not end by compression (the tip is live), and not into other
    # children of an ancestor.
    assert archived(db, "root", "mid", "tip") == [1, 1, 1]
    assert archived(db, "root-delegate") == [1 if start == "root" else 0]
    assert archived(db, "tip-delegate", "unrelated") == [0, 0]
    assert [row["id"] for row in db.list_sessions_rich()] == ["unrelated"]
    assert db.set_session_archived(start, False) is True
    assert archived(db, "root", "mid", "tip", "root-delegate") == [0, 0, 0, 0]
    (row, _) = db.list_sessions_rich()
    assert (row["id"], row["_lineage_root_id"]) == ("tip", "root")


def test_archiving_a_projected_tip_hides_its_root(db, make_session):
    build_conversation(make_session)
    (row, _) = db.list_sessions_rich()
    db.set_session_archived(row["id"], True)
    assert [row["id"] for row in db.list_sessions_rich()] == ["unrelated"]
    (hidden,) = db.list_sessions_rich(archived_only=True)
    assert (hidden["id"], hidden["_lineage_root_id"]) == ("tip", "root")


def test_a_parent_that_did_not_end_by_compression_is_left_alone(db, make_session):
    make_session("parent", started=100.0, ended=200.0, reason="branched")
    make_session("branch", started=210.0, parent="parent")
    db.set_session_archived("branch", True)
    assert archived(db, "parent", "branch") == [0, 1]


def test_a_cycle_ends_the_walk(db, make_session, raw):
    make_session("x", started=100.0, ended=150.0, reason="compression")
    make_session("y", started=200.0, parent="x", ended=250.0, reason="compression")
    raw.execute("UPDATE sessions SET parent_session_id = 'y' WHERE id = 'x'")
    assert db.set_session_archived("x", True) is True
    assert archived(db, "x", "y") == [1, 1]


def test_a_bad_session_id_is_refused(db):
    with pytest.raises(TypeError):
        db.set_session_archived(None, True)
