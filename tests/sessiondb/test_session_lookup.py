"""search_sessions_by_id (a conversation by part of a session id) and list_cron_job_runs
(one scheduled job's run history)."""

from __future__ import annotations

import pytest


def ids(rows):
    return [row["id"] for row in rows]


# --- search_sessions_by_id ---------------------------------------------------------------------


def seed(db, raw, session_id, started, archived=False):
    db.create_session(session_id, "cli", model="m")
    db.append_message(session_id, "user", "ordinary message")
    raw.set_started(session_id, started)
    raw.execute("UPDATE messages SET timestamp = ? WHERE session_id = ?", (started, session_id))
    if archived:
        db.set_session_archived(session_id, True)


def test_exact_prefix_and_substring_matches(db, raw):
    seed(db, raw, "20260603_090200_abcd12", 100.0)
    seed(db, raw, "20260602_111111_other99", 200.0)
    assert ids(db.search_sessions_by_id("20260603_090200_abcd12")) == ["20260603_090200_abcd12"]
    assert ids(db.search_sessions_by_id("20260603")) == ["20260603_090200_abcd12"]
    assert ids(db.search_sessions_by_id("  ABCD12 ")) == ["20260603_090200_abcd12"]
    assert ids(db.search_sessions_by_id("2026060")) == ["20260602_111111_other99", "20260603_090200_abcd12"]
    assert db.search_sessions_by_id("zzz") == []


def test_exact_then_prefix_then_substring_each_by_activity(db, raw):
    seed(db, raw, "x_abc", 400.0)
    seed(db, raw, "abc_2", 300.0)
    seed(db, raw, "abc", 100.0)
    seed(db, raw, "abc_1", 200.0)
    seed(db, raw, "y_abc", 500.0)
    assert ids(db.search_sessions_by_id("ABC")) == ["abc", "abc_2", "abc_1", "y_abc", "x_abc"]
    assert ids(db.search_sessions_by_id("abc", limit=2)) == ["abc", "abc_2"]


def test_only_four_times_the_limit_are_ranked(db, raw):
    # Upstream's window: an exact match older than 4 x limit other matches is not found.
    seed(db, raw, "needle", 1.0)
    for index in range(4):
        seed(db, raw, f"needle-{index}", 10.0 + index)
    assert ids(db.search_sessions_by_id("needle", limit=1)) == ["needle-3"]
    assert ids(db.search_sessions_by_id("needle", limit=2)) == ["needle", "needle-3"]


def test_archived_sessions_included_unless_asked_not_to(db, raw):
    seed(db, raw, "20260603_live", 100.0)
    seed(db, raw, "20260603_archived", 200.0, archived=True)
    assert ids(db.search_sessions_by_id("20260603")) == ["20260603_archived", "20260603_live"]
    assert ids(db.search_sessions_by_id("20260603", include_archived=False)) == ["20260603_live"]


def test_a_root_id_finds_its_projected_tip(db, make_session):
    make_session("20260602_root99", started=100.0, ended=200.0, reason="compression")
    db.append_message("20260602_root99", "user", "root conversation")
    make_session("20260603_tip01", started=210.0, parent="20260602_root99")
    db.append_message("20260603_tip01", "user", "continued")
    (match,) = db.search_sessions_by_id("root99")
    assert (match["id"], match["_lineage_root_id"]) == ("20260603_tip01", "20260602_root99")
    assert match["preview"] == "continued"
    # An exact root id ranks first too (it matches _lineage_root_id).
    make_session("20260602_root99x", started=300.0)
    assert ids(db.search_sessions_by_id("20260602_root99")) == ["20260603_tip01", "20260602_root99x"]


def test_hidden_children_are_not_found(db, make_session):
    make_session("parent", started=100.0)
    make_session("parent-sub", started=110.0, parent="parent", model_config={"_delegate_from": "parent"})
    assert ids(db.search_sessions_by_id("sub")) == []


@pytest.mark.parametrize("query", ["", "   ", None])
def test_blank_query_returns_nothing(db, raw, query):
    seed(db, raw, "s1", 100.0)
    assert db.search_sessions_by_id(query) == []


@pytest.mark.parametrize("limit", [0, -3])
def test_limit_of_zero_or_less_returns_nothing(db, raw, limit):
    seed(db, raw, "s1", 100.0)
    assert db.search_sessions_by_id("s1", limit=limit) == []


def test_wildcards_in_the_query_are_literal(db, raw):
    seed(db, raw, "a_b", 100.0)
    seed(db, raw, "axb", 200.0)
    assert ids(db.search_sessions_by_id("a_b")) == ["a_b"]


# --- list_cron_job_runs ------------------------------------------------------------------------


def seed_run(db, raw, job_id, index, started):
    session_id = f"cron_{job_id}_{index:08d}"
    db.create_session(session_id, "cron")
    db.append_message(session_id, "user", f"run {index} for {job_id}")
    db.append_message(session_id, "assistant", "done")
    db.end_session(session_id, "completed")
    raw.set_started(session_id, started)
    return session_id


def test_runs_of_one_job_latest_first_with_preview_and_activity(db, raw):
    for index in range(5):
        seed_run(db, raw, "alpha", index, 1000.0 + index * 60)
    for index in range(3):
        seed_run(db, raw, "beta", index, 1000.0 + index * 60)
    runs = db.list_cron_job_runs("alpha")
    assert ids(runs) == [f"cron_alpha_{index:08d}" for index in (4, 3, 2, 1, 0)]
    assert runs[0]["preview"] == "run 4 for alpha"
    assert runs[0]["last_active"] >= runs[0]["started_at"]
    assert {"title", "source", "message_count", "archived"} <= set(runs[0])


def test_other_jobs_sharing_text_never_leak_in(db, raw):
    seed_run(db, raw, "alpha", 0, 1000.0)
    seed_run(db, raw, "xalpha", 0, 1010.0)
    seed_run(db, raw, "alpha2", 0, 1020.0)
    seed_run(db, raw, "alpha_2", 0, 1030.0)
    assert ids(db.list_cron_job_runs("alpha2")) == ["cron_alpha2_00000000"]
    assert ids(db.list_cron_job_runs("xalpha")) == ["cron_xalpha_00000000"]
    # The prefix "cron_alpha_" also covers job "alpha_2": ids alone cannot tell them apart.
    assert ids(db.list_cron_job_runs("alpha")) == ["cron_alpha_2_00000000", "cron_alpha_00000000"]


def test_only_cron_sessions_count(db, raw):
    seed_run(db, raw, "alpha", 0, 1000.0)
    db.create_session("cron_alpha_manual", "cli")
    assert ids(db.list_cron_job_runs("alpha")) == ["cron_alpha_00000000"]


def test_paging_and_ties(db, raw):
    for index in range(5):
        seed_run(db, raw, "job", index, 1000.0)
    assert ids(db.list_cron_job_runs("job", limit=2)) == ["cron_job_00000004", "cron_job_00000003"]
    assert ids(db.list_cron_job_runs("job", limit=2, offset=2)) == ["cron_job_00000002", "cron_job_00000001"]
    assert db.list_cron_job_runs("job", offset=5) == []
    assert db.list_cron_job_runs("nobody") == []


def test_archived_and_child_runs_are_listed(db, raw):
    root = seed_run(db, raw, "job", 0, 1000.0)
    db.set_session_archived(root, True)
    db.create_session("cron_job_child", "cron", parent_session_id=root, model_config={"_delegate_from": root})
    raw.set_started("cron_job_child", 2000.0)
    assert ids(db.list_cron_job_runs("job")) == ["cron_job_child", root]


def test_bad_arguments_are_refused(db):
    with pytest.raises(TypeError):
        db.list_cron_job_runs(None)
    with pytest.raises(ValueError):
        db.list_cron_job_runs("job", limit=-1)
