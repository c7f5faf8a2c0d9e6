"""update_session_cwd, backfill_repo_roots and distinct_session_cwds: where sessions ran."""

from __future__ import annotations

import pytest


def workspace_of(db, session_id):
    row = db.get_session(session_id)
    return row["cwd"], row["git_branch"], row["git_repo_root"]


# --- update_session_cwd ------------------------------------------------------------------------


def test_cwd_branch_and_root_are_recorded(db, make_session):
    make_session("s", started=1.0)
    db.update_session_cwd(
        "s", "/home/me/project", git_branch=" feature/x ", git_repo_root="\t/home/me/project\n"
    )
    assert workspace_of(db, "s") == ("/home/me/project", "feature/x", "/home/me/project")


def test_cwd_is_stored_as_given_and_always_overwritten(db, make_session):
    make_session("s", started=1.0)
    db.update_session_cwd("s", "/first")
    db.update_session_cwd("s", " /second/ ")
    assert workspace_of(db, "s") == (" /second/ ", None, None)


def test_a_blank_git_probe_never_erases_what_an_earlier_one_found(db, make_session):
    make_session("s", started=1.0)
    db.update_session_cwd("s", "/repo", git_branch="main", git_repo_root="/repo")
    db.update_session_cwd("s", "/repo/sub", git_branch="   ", git_repo_root="")
    db.update_session_cwd("s", "/repo/sub2")
    assert workspace_of(db, "s") == ("/repo/sub2", "main", "/repo")
    db.update_session_cwd("s", "/repo/sub2", git_branch="dev")
    assert workspace_of(db, "s") == ("/repo/sub2", "dev", "/repo")


def test_without_a_session_id_or_cwd_nothing_happens(db, make_session):
    make_session("s", started=1.0)
    db.update_session_cwd("s", "", git_branch="main")
    db.update_session_cwd("s", None, git_branch="main")  # type: ignore[arg-type]
    db.update_session_cwd("", "/somewhere")
    assert workspace_of(db, "s") == (None, None, None)


def test_an_unknown_session_is_not_an_error(db):
    db.update_session_cwd("ghost", "/somewhere", git_branch="main")
    assert db.get_session("ghost") is None


def test_wrong_types_are_refused(db, make_session):
    make_session("s", started=1.0)
    with pytest.raises(TypeError, match="cwd"):
        db.update_session_cwd("s", 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="git_branch"):
        db.update_session_cwd("s", "/x", git_branch=7)  # type: ignore[arg-type]
    assert workspace_of(db, "s") == (None, None, None)


# --- backfill_repo_roots -----------------------------------------------------------------------


def test_backfill_fills_only_sessions_without_a_root(db, make_session, raw):
    for session_id, cwd in [("a", "/repo"), ("b", "/repo"), ("c", "/repo"), ("d", "/other"), ("e", "/plain")]:
        make_session(session_id, started=1.0)
        db.update_session_cwd(session_id, cwd)
    db.update_session_cwd("b", "/repo", git_repo_root="/recorded")
    raw.execute("UPDATE sessions SET git_repo_root = '' WHERE id = ?", ("c",))
    db.backfill_repo_roots({"/repo": "/repo", "/other": "/other-root", "/plain": "", "": "/nowhere"})
    assert {sid: workspace_of(db, sid)[2] for sid in "abcde"} == {
        "a": "/repo",
        "b": "/recorded",
        "c": "/repo",
        "d": "/other-root",
        "e": None,
    }


def test_backfill_with_nothing_to_do(db, make_session):
    make_session("a", started=1.0)
    db.update_session_cwd("a", "/repo")
    db.backfill_repo_roots({})
    db.backfill_repo_roots({"/repo": ""})
    db.backfill_repo_roots({"/unknown": "/root"})
    assert workspace_of(db, "a") == ("/repo", None, None)


# --- distinct_session_cwds ---------------------------------------------------------------------


def test_distinct_cwds_counts_sessions_and_their_latest_activity(db, make_session, raw):
    make_session("a1", started=100.0, ended=150.0, reason="done")
    make_session("a2", started=200.0)
    make_session("a-child", started=120.0, parent="a1", ended=130.0, reason="done")
    make_session("b", started=50.0, ended=400.0, reason="done")
    make_session("blank", started=1.0)
    make_session("spaces", started=1.0)
    make_session("none", started=1.0)
    for session_id in ("a1", "a2", "a-child"):
        db.update_session_cwd(session_id, "/proj/a")
    db.update_session_cwd("b", "/proj/b")
    db.update_session_cwd("spaces", "   ")
    raw.execute("UPDATE sessions SET cwd = '' WHERE id = ?", ("blank",))
    result = db.distinct_session_cwds()
    assert result == [
        {"cwd": "/proj/a", "sessions": 3, "last_active": 200.0},
        {"cwd": "/proj/b", "sessions": 1, "last_active": 400.0},
    ]
    assert all(type(item["sessions"]) is int and type(item["last_active"]) is float for item in result)


def test_archived_sessions_count_only_when_asked(db, make_session, raw):
    make_session("live", started=10.0)
    make_session("archived", started=20.0, ended=30.0, reason="done")
    make_session("archived-only", started=40.0, ended=50.0, reason="done")
    db.update_session_cwd("live", "/shared")
    db.update_session_cwd("archived", "/shared")
    db.update_session_cwd("archived-only", "/old")
    raw.execute("UPDATE sessions SET archived = 1 WHERE id IN (?, ?)", ("archived", "archived-only"))
    assert db.distinct_session_cwds() == [{"cwd": "/shared", "sessions": 1, "last_active": 10.0}]
    assert db.distinct_session_cwds(include_archived=True) == [
        {"cwd": "/old", "sessions": 1, "last_active": 50.0},
        {"cwd": "/shared", "sessions": 2, "last_active": 30.0},
    ]


def test_distinct_cwds_of_an_empty_store(db):
    assert db.distinct_session_cwds() == []
