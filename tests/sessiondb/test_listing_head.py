"""list_sessions_rich and session_count at upstream head: the new parameters and their
order, child and delegate markers, archived sessions, working-directory prefixes, message
counts, and the id/title queries of the last-activity order."""

from __future__ import annotations

import inspect

import pytest

from hermes_store import SessionDB
from hermes_store.aio import AsyncSessionDB

BRANCH = {"_branched_from": "parent"}
DELEGATE = {"_delegate_from": "parent"}


def ids(rows):
    return [row["id"] for row in rows]


# --- signatures ------------------------------------------------------------------------------


LISTING_PARAMETERS = [
    "source",
    "exclude_sources",
    "cwd_prefix",
    "limit",
    "offset",
    "include_children",
    "min_message_count",
    "project_compression_tips",
    "order_by_last_active",
    "include_archived",
    "archived_only",
    "id_query",
    "search_query",
]
COUNT_PARAMETERS = [
    "source",
    "cwd_prefix",
    "min_message_count",
    "include_archived",
    "archived_only",
    "exclude_children",
    "exclude_sources",
]


@pytest.mark.parametrize("face", [SessionDB, AsyncSessionDB])
def test_parameters_in_upstream_order(face):
    listing = inspect.signature(face.list_sessions_rich).parameters
    count = inspect.signature(face.session_count).parameters
    assert list(listing)[1:] == LISTING_PARAMETERS
    assert list(count)[1:] == COUNT_PARAMETERS


def test_positional_arguments_bind_in_the_new_order(db, make_session):
    make_session("a", started=1.0, source="cli", cwd="/w")
    make_session("b", started=2.0, source="cli", cwd="/elsewhere")
    make_session("c", started=3.0, source="cli", cwd="/w/x")
    # source, exclude_sources, cwd_prefix, limit, offset
    assert ids(db.list_sessions_rich("cli", None, "/w", 1, 1)) == ["a"]
    # source, cwd_prefix, min_message_count, include_archived
    assert db.session_count("cli", "/w", 0, False) == 2


# --- which children are listed ---------------------------------------------------------------


def test_branch_marker_lists_a_child_whatever_its_parent_did(db, make_session):
    make_session("parent", started=100.0, ended=200.0, reason="tui_shutdown")
    make_session("marked", started=150.0, parent="parent", model_config=BRANCH)
    make_session("unmarked", started=300.0, parent="parent")
    assert ids(db.list_sessions_rich()) == ["marked", "parent"]
    assert db.session_count(exclude_children=True) == 2
    assert db.session_count() == 3


def test_legacy_branch_test_still_lists_old_branches(db, make_session):
    make_session("parent", started=100.0, ended=200.0, reason="branched")
    make_session("old-branch", started=200.0, parent="parent")
    make_session("early", started=150.0, parent="parent")
    assert ids(db.list_sessions_rich()) == ["old-branch", "parent"]


def test_delegate_marker_hides_a_row_even_as_a_root(db, make_session):
    make_session("root", started=100.0)
    make_session("orphaned-run", started=200.0, model_config={"_delegate_from": "__orphaned__"})
    make_session("tagged-branch", started=300.0, parent="root", model_config={**BRANCH, **DELEGATE})
    assert ids(db.list_sessions_rich()) == ["root"]
    assert ids(db.list_sessions_rich(order_by_last_active=True)) == ["root"]
    assert db.session_count(exclude_children=True) == 1
    assert ids(db.list_sessions_rich(include_children=True)) == ["tagged-branch", "orphaned-run", "root"]


def test_null_or_invalid_markers_never_fail_a_listing(db, make_session, raw):
    make_session("null-marker", started=100.0, model_config={"_delegate_from": None, "x": 1})
    make_session("not-json", started=200.0)
    make_session("a-list", started=300.0)
    make_session("a-string", started=400.0)
    raw.execute("UPDATE sessions SET model_config = 'not json {' WHERE id = 'not-json'")
    raw.execute("UPDATE sessions SET model_config = '[\"_delegate_from\"]' WHERE id = 'a-list'")
    raw.execute("UPDATE sessions SET model_config = '\"_delegate_from\"' WHERE id = 'a-string'")
    expected = ["a-string", "a-list", "not-json", "null-marker"]
    assert ids(db.list_sessions_rich()) == expected
    assert ids(db.list_sessions_rich(order_by_last_active=True)) == expected
    assert db.session_count(exclude_children=True) == 4


def test_marker_with_spaces_and_any_value_counts(db, make_session, raw):
    make_session("spaced", started=100.0)
    make_session("numeric", started=200.0)
    raw.execute("UPDATE sessions SET model_config = ? WHERE id = 'spaced'", ('{ "_delegate_from" :\n "p" }',))
    raw.execute("UPDATE sessions SET model_config = ? WHERE id = 'numeric'", ('{"_delegate_from": 0}',))
    assert db.list_sessions_rich() == []


def test_compression_continuations_stay_hidden_and_are_projected(db, make_session):
    make_session("root", started=100.0, ended=200.0, reason="compression")
    make_session("early-continuation", started=150.0, parent="root")
    (row,) = db.list_sessions_rich()
    assert (row["id"], row["_lineage_root_id"]) == ("early-continuation", "root")


# --- archived sessions ------------------------------------------------------------------------


def test_archived_sessions_are_left_out_by_default(db, make_session, raw):
    make_session("live", started=100.0)
    make_session("hidden", started=200.0)
    raw.execute("UPDATE sessions SET archived = 1 WHERE id = 'hidden'")
    assert ids(db.list_sessions_rich()) == ["live"]
    assert ids(db.list_sessions_rich(order_by_last_active=True)) == ["live"]
    assert ids(db.list_sessions_rich(archived_only=True)) == ["hidden"]
    assert ids(db.list_sessions_rich(include_archived=True)) == ["hidden", "live"]
    assert ids(db.list_sessions_rich(include_archived=True, archived_only=True)) == ["hidden"]
    assert db.session_count() == 1
    assert db.session_count(archived_only=True) == 1
    assert db.session_count(include_archived=True) == 2


# --- cwd_prefix -------------------------------------------------------------------------------


def test_cwd_prefix_takes_the_folder_and_below(db, make_session):
    make_session("exact", started=1.0, cwd="/repo")
    make_session("below", started=2.0, cwd="/repo/sub/dir")
    make_session("sibling", started=3.0, cwd="/repo-wt-feature")
    make_session("none", started=4.0)
    make_session("windows", started=5.0, cwd="C:\\code\\app\\src")
    assert ids(db.list_sessions_rich(cwd_prefix="/repo")) == ["below", "exact"]
    assert ids(db.list_sessions_rich(cwd_prefix="/repo/")) == ["below", "exact"]
    assert ids(db.list_sessions_rich(cwd_prefix="C:\\code\\app")) == ["windows"]
    assert ids(db.list_sessions_rich(cwd_prefix="C:\\code\\app\\")) == ["windows"]
    assert db.session_count(cwd_prefix="/repo") == 2
    assert ids(db.list_sessions_rich(cwd_prefix="/repo", order_by_last_active=True)) == ["below", "exact"]


def test_cwd_prefix_wildcards_are_literal(db, make_session):
    # Better than upstream, whose LIKE lets _ and % in a path match any characters.
    make_session("underscore", started=1.0, cwd="/my_repo/src")
    make_session("lookalike", started=2.0, cwd="/myXrepo/src")
    make_session("percent", started=3.0, cwd="/100%/x")
    make_session("hundreds", started=4.0, cwd="/1000/x")
    assert ids(db.list_sessions_rich(cwd_prefix="/my_repo")) == ["underscore"]
    assert ids(db.list_sessions_rich(cwd_prefix="/100%")) == ["percent"]
    assert db.session_count(cwd_prefix="/my_repo") == 1


def test_cwd_prefix_ignores_case_below_the_folder_but_not_for_the_folder_itself(db, make_session):
    make_session("lower-below", started=1.0, cwd="/repo/src")
    make_session("upper-exact", started=2.0, cwd="/REPO")
    assert ids(db.list_sessions_rich(cwd_prefix="/Repo")) == ["lower-below"]


# --- min_message_count ------------------------------------------------------------------------


def test_min_message_count_uses_the_session_counter(db, make_session, raw):
    make_session("empty", started=1.0)
    make_session("one", started=2.0)
    make_session("three", started=3.0)
    db.append_message("one", "user", "a")
    for text in ("a", "b", "c"):
        db.append_message("three", "user", text)
    assert ids(db.list_sessions_rich(min_message_count=1)) == ["three", "one"]
    assert ids(db.list_sessions_rich(min_message_count=2)) == ["three"]
    assert ids(db.list_sessions_rich(min_message_count=0)) == ["three", "one", "empty"]
    assert db.session_count(min_message_count=1) == 2
    # The counter, not the rows: it follows the live set after compaction.
    raw.execute("UPDATE sessions SET message_count = 0 WHERE id = 'three'")
    assert ids(db.list_sessions_rich(min_message_count=1)) == ["one"]


def test_negative_min_message_count_is_refused(db):
    with pytest.raises(ValueError):
        db.list_sessions_rich(min_message_count=-1)
    with pytest.raises(ValueError):
        db.session_count(min_message_count=-1)


# --- session_count's other filters -------------------------------------------------------------


def test_session_count_filters_combine(db, make_session, raw):
    make_session("cli-root", started=1.0, source="cli", cwd="/w")
    make_session("cli-child", started=2.0, source="cli", parent="cli-root", cwd="/w")
    make_session("cron-run", started=3.0, source="cron", cwd="/w")
    make_session("tg", started=4.0, source="telegram", cwd="/elsewhere")
    assert db.session_count() == 4
    assert db.session_count(exclude_children=True) == 3
    assert db.session_count(exclude_sources=["cron"]) == 3
    assert db.session_count(exclude_children=True, exclude_sources=["cron", "telegram"]) == 1
    assert db.session_count(source="cli", cwd_prefix="/w") == 2
    raw.execute("UPDATE sessions SET archived = 1 WHERE id = 'cli-root'")
    assert db.session_count(source="cli") == 1
    assert db.session_count(source="cli", include_archived=True) == 2


# --- id_query and search_query -----------------------------------------------------------------


def build_chain(make_session, raw):
    make_session("20260601_root_aa", started=100.0, ended=200.0, reason="compression")
    make_session("20260602_tip_bb", started=210.0, parent="20260601_root_aa")
    make_session("20260603_other_cc", started=300.0)


def test_id_query_matches_any_session_of_the_chain(db, make_session, raw):
    build_chain(make_session, raw)
    by_root = db.list_sessions_rich(order_by_last_active=True, id_query="ROOT_AA")
    by_tip = db.list_sessions_rich(order_by_last_active=True, id_query="tip_b")
    assert ids(by_root) == ids(by_tip) == ["20260602_tip_bb"]
    assert by_root[0]["_lineage_root_id"] == "20260601_root_aa"
    assert ids(db.list_sessions_rich(order_by_last_active=True, id_query="2026060")) == [
        "20260603_other_cc",
        "20260602_tip_bb",
    ]


def test_id_query_wildcards_are_literal(db, make_session):
    make_session("a_b", started=1.0)
    make_session("axb", started=2.0)
    make_session("100%", started=3.0)
    assert ids(db.list_sessions_rich(order_by_last_active=True, id_query="a_b")) == ["a_b"]
    assert ids(db.list_sessions_rich(order_by_last_active=True, id_query="%")) == ["100%"]


def test_queries_are_ignored_without_order_by_last_active(db, make_session, raw):
    build_chain(make_session, raw)
    assert len(db.list_sessions_rich(id_query="nothing-matches")) == 2
    assert len(db.list_sessions_rich(search_query="nothing-matches")) == 2


def test_blank_queries_filter_nothing(db, make_session, raw):
    build_chain(make_session, raw)
    assert len(db.list_sessions_rich(order_by_last_active=True, id_query="  ", search_query="")) == 2


def test_search_query_matches_titles_ids_and_compact_titles(db, make_session, raw):
    build_chain(make_session, raw)
    db.set_session_title("20260601_root_aa", "Old Name")
    db.set_session_title("20260602_tip_bb", "AN-94 review")
    db.set_session_title("20260603_other_cc", "Groceries")

    def found(query):
        return ids(db.list_sessions_rich(order_by_last_active=True, search_query=query))

    assert found("an-94") == ["20260602_tip_bb"]
    assert found("an94") == ["20260602_tip_bb"]
    assert found("AN 94") == ["20260602_tip_bb"]
    assert found("old name") == ["20260602_tip_bb"]  # the root's title, within the chain
    assert found("other_cc") == ["20260603_other_cc"]
    assert found("grocer") == ["20260603_other_cc"]
    assert found("nothing") == []


def test_search_and_id_queries_combine(db, make_session, raw):
    build_chain(make_session, raw)
    db.set_session_title("20260603_other_cc", "Shared words")
    db.set_session_title("20260602_tip_bb", "Shared words too")
    rows = db.list_sessions_rich(order_by_last_active=True, search_query="shared", id_query="other")
    assert ids(rows) == ["20260603_other_cc"]


def test_queries_apply_with_other_filters_and_paging(db, make_session):
    for index in range(5):
        make_session(f"job-{index}", started=float(index), source="cron" if index % 2 else "cli")
    rows = db.list_sessions_rich(order_by_last_active=True, id_query="job", source="cli", limit=2, offset=1)
    assert ids(rows) == ["job-2", "job-0"]


def test_non_string_queries_are_refused(db):
    with pytest.raises(TypeError):
        db.list_sessions_rich(order_by_last_active=True, id_query=5)
    with pytest.raises(TypeError):
        db.list_sessions_rich(cwd_prefix=b"/w")
