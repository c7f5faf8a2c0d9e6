"""list_sessions_rich (filters, preview, last_active, projection, ordering) and search_sessions."""

from __future__ import annotations

SESSION_KEYS = {
    "id", "source", "user_id", "model", "model_config", "system_prompt", "parent_session_id",
    "started_at", "ended_at", "end_reason", "message_count", "tool_call_count", "input_tokens",
    "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens",
    "billing_provider", "billing_base_url", "billing_mode", "estimated_cost_usd",
    "actual_cost_usd", "cost_status", "cost_source", "pricing_version", "title", "api_call_count",
    "session_key", "chat_id", "chat_type", "thread_id", "cwd", "git_branch", "git_repo_root",
    "handoff_state", "handoff_platform", "handoff_error", "compression_failure_cooldown_until",
    "compression_failure_error", "rewind_count", "archived",
}  # fmt: skip
RICH_KEYS = SESSION_KEYS | {"preview", "last_active"}
PROJECTED_KEYS = (
    "id",
    "ended_at",
    "end_reason",
    "message_count",
    "tool_call_count",
    "title",
    "last_active",
    "preview",
    "model",
    "system_prompt",
    "cwd",
    "git_branch",
    "git_repo_root",
)


def ids(rows):
    return [row["id"] for row in rows]


# --- shape, order, paging --------------------------------------------------------------------


def test_rich_rows_have_session_columns_plus_preview_and_last_active(db, make_session):
    make_session("only", started=1000.0)
    (row,) = db.list_sessions_rich()
    assert set(row) == RICH_KEYS


def test_default_order_is_started_at_descending(db, make_session):
    make_session("b", started=2000.0)
    make_session("c", started=3000.0)
    make_session("a", started=1000.0)
    assert ids(db.list_sessions_rich()) == ["c", "b", "a"]


def test_limit_and_offset(db, make_session):
    for index in range(6):
        make_session(f"s{index}", started=1000.0 + index)
    assert ids(db.list_sessions_rich(limit=2)) == ["s5", "s4"]
    assert ids(db.list_sessions_rich(limit=2, offset=2)) == ["s3", "s2"]
    assert ids(db.list_sessions_rich(limit=10, offset=5)) == ["s0"]
    assert db.list_sessions_rich(offset=6) == []


def test_default_limit_is_twenty(db, make_session):
    for index in range(23):
        make_session(f"s{index:02d}", started=1000.0 + index)
    rows = db.list_sessions_rich()
    assert len(rows) == 20
    assert rows[0]["id"] == "s22"


def test_empty_database_lists_nothing(db):
    assert db.list_sessions_rich() == []
    assert db.list_sessions_rich(order_by_last_active=True) == []


# --- child filter ----------------------------------------------------------------------------


def test_children_filter_keeps_roots_and_branches(db, make_session):
    make_session("root", started=100.0)
    make_session("branched-parent", started=200.0, ended=300.0, reason="branched")
    make_session("branch", started=300.0, parent="branched-parent")
    make_session("early-branch", started=250.0, parent="branched-parent")
    make_session("compressed-parent", started=400.0, ended=500.0, reason="compression")
    make_session("continuation", started=510.0, parent="compressed-parent")
    make_session("live-parent", started=600.0)
    make_session("delegate", started=610.0, parent="live-parent")
    make_session("exited-parent", started=700.0, ended=800.0, reason="user_exit")
    make_session("late-child", started=900.0, parent="exited-parent")

    shown = ids(db.list_sessions_rich(project_compression_tips=False))
    assert shown == ["exited-parent", "live-parent", "compressed-parent", "branch", "branched-parent", "root"]


def test_include_children_lists_everything(db, make_session):
    make_session("live-parent", started=600.0)
    make_session("delegate", started=610.0, parent="live-parent")
    make_session("compressed-parent", started=400.0, ended=500.0, reason="compression")
    make_session("continuation", started=510.0, parent="compressed-parent")
    assert ids(db.list_sessions_rich(include_children=True)) == [
        "delegate",
        "live-parent",
        "continuation",
        "compressed-parent",
    ]


# --- source filters --------------------------------------------------------------------------


def test_source_and_exclude_filters(db, make_session):
    make_session("c1", started=1.0, source="cli")
    make_session("t1", started=2.0, source="telegram")
    make_session("d1", started=3.0, source="discord")
    make_session("c2", started=4.0, source="cli")
    assert ids(db.list_sessions_rich(source="cli")) == ["c2", "c1"]
    assert ids(db.list_sessions_rich(exclude_sources=["cli"])) == ["d1", "t1"]
    assert ids(db.list_sessions_rich(exclude_sources=["cli", "discord"])) == ["t1"]
    assert ids(db.list_sessions_rich(source="cli", exclude_sources=["cli"])) == []
    assert ids(db.list_sessions_rich(source="telegram", exclude_sources=["cli"])) == ["t1"]
    assert ids(db.list_sessions_rich(exclude_sources=[])) == ["c2", "d1", "t1", "c1"]
    assert ids(db.list_sessions_rich(source="")) == ["c2", "d1", "t1", "c1"]


# --- preview ---------------------------------------------------------------------------------


def preview_of(db, session_id):
    (row,) = [row for row in db.list_sessions_rich(include_children=True) if row["id"] == session_id]
    return row["preview"]


def test_preview_is_first_user_message(db, make_session):
    make_session("p", started=1.0)
    db.append_message("p", "system", "system prompt text")
    db.append_message("p", "assistant", "assistant greeting")
    db.append_message("p", "user", None)
    db.append_message("p", "user", "first real question")
    db.append_message("p", "user", "second question")
    assert preview_of(db, "p") == "first real question"


def test_preview_follows_insertion_order(db, make_session, raw):
    make_session("p", started=1.0)
    first = db.append_message("p", "user", "asked first")
    second = db.append_message("p", "user", "asked second")
    raw.set_message_time(first, 50.0)
    raw.set_message_time(second, 60.0)
    assert preview_of(db, "p") == "asked first"


def test_preview_without_user_message_is_empty(db, make_session):
    make_session("p", started=1.0)
    db.append_message("p", "assistant", "only me")
    assert preview_of(db, "p") == ""


def test_preview_flattens_newlines(db, make_session):
    make_session("p", started=1.0)
    db.append_message("p", "user", "line one\nline two\r\nline three\rend")
    assert preview_of(db, "p") == "line one line two  line three end"


def test_preview_is_trimmed(db, make_session):
    make_session("p", started=1.0)
    db.append_message("p", "user", "\n   padded question   \n")
    assert preview_of(db, "p") == "padded question"


def test_empty_first_user_message_gives_empty_preview(db, make_session):
    # The first user message with non-NULL content is taken, even when it is "".
    make_session("p", started=1.0)
    db.append_message("p", "user", "")
    db.append_message("p", "user", "later text")
    assert preview_of(db, "p") == ""


def test_preview_window_is_taken_before_trimming(db, make_session):
    # 63 characters are cut first, then trimmed: three leading spaces leave exactly 60.
    make_session("p", started=1.0)
    db.append_message("p", "user", "   " + "y" * 70)
    assert preview_of(db, "p") == "y" * 60


def test_preview_of_exactly_sixty_characters_has_no_ellipsis(db, make_session):
    make_session("p", started=1.0)
    db.append_message("p", "user", "x" * 60)
    assert preview_of(db, "p") == "x" * 60


def test_preview_longer_than_sixty_is_cut_with_ellipsis(db, make_session):
    make_session("p", started=1.0)
    text = "".join(str(i % 10) for i in range(61))
    db.append_message("p", "user", text)
    assert preview_of(db, "p") == text[:60] + "..."
    db.append_message(make_session("q", started=2.0), "user", "word " * 40)
    assert preview_of(db, "q") == ("word " * 12)[:60] + "..."


def test_preview_of_non_ascii_counts_characters(db, make_session):
    make_session("p", started=1.0)
    db.append_message("p", "user", "記" * 70)
    assert preview_of(db, "p") == "記" * 60 + "..."


# --- last_active -----------------------------------------------------------------------------


def test_last_active_is_latest_message_time_or_start(db, make_session, raw):
    make_session("busy", started=1000.0)
    make_session("idle", started=2000.0)
    first = db.append_message("busy", "user", "a")
    second = db.append_message("busy", "assistant", "b")
    raw.set_message_time(first, 1500.0)
    raw.set_message_time(second, 1400.0)
    rows = {row["id"]: row for row in db.list_sessions_rich()}
    assert rows["busy"]["last_active"] == 1500.0
    assert rows["idle"]["last_active"] == 2000.0


# --- compression projection ------------------------------------------------------------------


def build_compressed_conversation(db, make_session, raw):
    make_session(
        "root",
        started=1000.0,
        ended=2000.0,
        reason="compression",
        model="root-model",
        system_prompt="root prompt",
        user_id="u-1",
        source="telegram",
        cwd="/root/cwd",
    )
    db.set_session_title("root", "Trip planning")
    db.update_token_counts("root", input_tokens=500, output_tokens=50)
    raw.set_message_time(db.append_message("root", "user", "root question"), 1100.0)
    make_session("mid", started=2000.0, parent="root", ended=3000.0, reason="compression", model="mid-model")
    raw.set_message_time(db.append_message("mid", "user", "mid question"), 2100.0)
    make_session(
        "tip", started=3000.5, parent="mid", model="tip-model", system_prompt="tip prompt", cwd="/tip"
    )
    raw.execute("UPDATE sessions SET git_branch = 'main', git_repo_root = '/repo' WHERE id = 'tip'")
    db.set_session_title("tip", "Trip planning #3")
    raw.set_message_time(db.append_message("tip", "user", "tip question"), 3400.0)
    raw.set_message_time(
        db.append_message("tip", "assistant", "tip answer", tool_calls=[{"id": "c"}, {"id": "d"}]), 3500.0
    )


def test_compression_root_is_projected_to_its_tip(db, make_session, raw):
    build_compressed_conversation(db, make_session, raw)
    (row,) = db.list_sessions_rich()
    assert row["_lineage_root_id"] == "root"
    assert {key: row[key] for key in PROJECTED_KEYS} == {
        "id": "tip",
        "ended_at": None,
        "end_reason": None,
        "message_count": 2,
        "tool_call_count": 2,
        "title": "Trip planning #3",
        "last_active": 3500.0,
        "preview": "tip question",
        "model": "tip-model",
        "system_prompt": "tip prompt",
        "cwd": "/tip",
        "git_branch": "main",
        "git_repo_root": "/repo",
    }
    # Everything else stays the root's.
    assert row["started_at"] == 1000.0
    assert row["source"] == "telegram"
    assert row["user_id"] == "u-1"
    assert row["parent_session_id"] is None
    assert (row["input_tokens"], row["output_tokens"]) == (500, 50)
    assert set(row) == RICH_KEYS | {"_lineage_root_id"}


def test_projection_can_be_turned_off(db, make_session, raw):
    build_compressed_conversation(db, make_session, raw)
    (row,) = db.list_sessions_rich(project_compression_tips=False)
    assert row["id"] == "root"
    assert row["preview"] == "root question"
    assert row["last_active"] == 1100.0
    assert "_lineage_root_id" not in row


def test_no_projection_when_children_are_included(db, make_session, raw):
    build_compressed_conversation(db, make_session, raw)
    rows = db.list_sessions_rich(include_children=True)
    assert ids(rows) == ["tip", "mid", "root"]
    assert all("_lineage_root_id" not in row for row in rows)
    assert rows[2]["end_reason"] == "compression"


def test_compression_root_without_continuation_is_not_projected(db, make_session):
    make_session("lonely", started=1000.0, ended=2000.0, reason="compression")
    make_session("delegate", started=1500.0, parent="lonely", model_config={"_delegate_from": "lonely"})
    (row,) = db.list_sessions_rich()
    assert row["id"] == "lonely"
    assert row["end_reason"] == "compression"
    assert "_lineage_root_id" not in row


def test_branch_root_is_not_projected(db, make_session):
    make_session("fork", started=1000.0, ended=2000.0, reason="branched")
    make_session("branch", started=2500.0, parent="fork")
    rows = db.list_sessions_rich()
    assert ids(rows) == ["branch", "fork"]
    assert all("_lineage_root_id" not in row for row in rows)


def test_projection_happens_after_limit(db, make_session):
    make_session("new-plain", started=5000.0)
    make_session("old-root", started=1000.0, ended=2000.0, reason="compression")
    make_session("old-tip", started=2001.0, parent="old-root")
    assert ids(db.list_sessions_rich(limit=1)) == ["new-plain"]
    assert ids(db.list_sessions_rich(limit=1, offset=1)) == ["old-tip"]


# --- order_by_last_active ----------------------------------------------------------------------


def test_order_by_last_active(db, make_session, raw):
    make_session("x", started=1000.0)
    raw.set_message_time(db.append_message("x", "user", "x msg"), 5000.0)
    make_session("y", started=2000.0)
    make_session("z", started=3000.0)
    raw.set_message_time(db.append_message("z", "user", "z msg"), 4000.0)
    rows = db.list_sessions_rich(order_by_last_active=True)
    assert ids(rows) == ["x", "z", "y"]
    assert set(rows[0]) == RICH_KEYS
    assert ids(db.list_sessions_rich(order_by_last_active=True, limit=1, offset=1)) == ["z"]


def test_order_by_last_active_uses_the_compression_tip_activity(db, make_session, raw):
    make_session("recent-plain", started=8000.0)
    make_session("old-root", started=100.0, ended=200.0, reason="compression")
    make_session("old-tip", started=200.0, parent="old-root")
    raw.set_message_time(db.append_message("old-tip", "user", "still going"), 9000.0)
    rows = db.list_sessions_rich(order_by_last_active=True)
    assert ids(rows) == ["old-tip", "recent-plain"]
    assert rows[0]["_lineage_root_id"] == "old-root"
    assert rows[0]["started_at"] == 100.0


def test_order_by_last_active_ignores_delegate_activity(db, make_session, raw):
    make_session("boss", started=100.0)
    make_session("worker", started=150.0, parent="boss")
    raw.set_message_time(db.append_message("worker", "user", "busy"), 9000.0)
    make_session("other", started=500.0)
    assert ids(db.list_sessions_rich(order_by_last_active=True)) == ["other", "boss"]


def test_order_by_last_active_ties_break_on_start_then_id(db, make_session):
    make_session("a", started=100.0)
    make_session("b", started=100.0)
    make_session("c", started=50.0)
    make_session("d", started=100.0)
    assert ids(db.list_sessions_rich(order_by_last_active=True)) == ["d", "b", "a", "c"]


def test_order_by_last_active_with_filters(db, make_session, raw):
    make_session("cli-old", started=100.0, source="cli")
    raw.set_message_time(db.append_message("cli-old", "user", "m"), 900.0)
    make_session("cli-new", started=200.0, source="cli")
    make_session("tg", started=300.0, source="telegram")
    assert ids(db.list_sessions_rich(source="cli", order_by_last_active=True)) == ["cli-old", "cli-new"]
    assert ids(db.list_sessions_rich(exclude_sources=["cli"], order_by_last_active=True)) == ["tg"]


# --- search_sessions -----------------------------------------------------------------------------


def test_search_sessions_orders_by_last_active(db, make_session, raw):
    make_session("a", started=100.0)
    make_session("b", started=200.0)
    make_session("c", started=300.0, parent="a")
    raw.set_message_time(db.append_message("a", "user", "x"), 1000.0)
    rows = db.search_sessions()
    assert ids(rows) == ["a", "c", "b"]
    assert set(rows[0]) == SESSION_KEYS | {"last_active"}
    assert rows[0]["last_active"] == 1000.0
    assert rows[1]["last_active"] == 300.0


def test_search_sessions_ties_break_on_start_then_id(db, make_session):
    make_session("a", started=100.0)
    make_session("b", started=100.0)
    make_session("c", started=100.0)
    assert ids(db.search_sessions()) == ["c", "b", "a"]


def test_search_sessions_source_limit_offset(db, make_session):
    make_session("c1", started=1.0, source="cli")
    make_session("t1", started=2.0, source="telegram")
    make_session("c2", started=3.0, source="cli")
    make_session("c3", started=4.0, source="cli")
    assert ids(db.search_sessions(source="cli")) == ["c3", "c2", "c1"]
    assert ids(db.search_sessions(source="cli", limit=1, offset=1)) == ["c2"]
    assert ids(db.search_sessions(limit=2)) == ["c3", "c2"]
    assert ids(db.search_sessions(source="")) == ["c3", "c2", "t1", "c1"]
