"""delete_session, prune_sessions, prune_empty_ghost_sessions (with transcript files) and
export_session / export_all. Delegate sub-agents and the bulk and clean-up deletes are in
test_hygiene.py."""

from __future__ import annotations

import time

import pytest

SESSION_KEYS = {
    "id", "source", "user_id", "model", "model_config", "system_prompt", "parent_session_id",
    "started_at", "ended_at", "end_reason", "message_count", "tool_call_count", "input_tokens",
    "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens",
    "billing_provider", "billing_base_url", "billing_mode", "estimated_cost_usd",
    "actual_cost_usd", "cost_status", "cost_source", "pricing_version", "title", "api_call_count",
    # Upstream's schema 17 columns.
    "session_key", "chat_id", "chat_type", "thread_id", "cwd", "git_branch", "git_repo_root",
    "handoff_state", "handoff_platform", "handoff_error", "compression_failure_cooldown_until",
    "compression_failure_error", "rewind_count", "archived",
}  # fmt: skip
DAY = 86400.0


def ids(rows):
    return [row["id"] for row in rows]


def transcript_files(directory, session_id):
    """Create every kind of transcript file Hermes keeps for a session; return their names."""
    names = [
        f"{session_id}.json",
        f"{session_id}.jsonl",
        f"request_dump_{session_id}_001.json",
        f"request_dump_{session_id}_20260101T101010.json",
    ]
    for name in names:
        (directory / name).write_text("{}", encoding="utf-8")
    return names


def remaining(directory):
    return sorted(path.name for path in directory.iterdir())


@pytest.fixture
def sessions_dir(tmp_path):
    directory = tmp_path / "sessions"
    directory.mkdir()
    return directory


# --- delete_session --------------------------------------------------------------------------


def test_delete_session_removes_row_and_messages(db, make_session):
    make_session("doomed", started=1.0)
    make_session("kept", started=2.0)
    db.append_message("doomed", "user", "vanishing words")
    db.append_message("kept", "user", "staying words")
    assert db.delete_session("doomed") is True
    assert db.get_session("doomed") is None
    assert db.get_messages("doomed") == []
    assert db.message_count() == 1
    assert db.search_messages("vanishing") == []
    assert [hit["session_id"] for hit in db.search_messages("staying")] == ["kept"]


def test_delete_missing_session_returns_false(db):
    assert db.delete_session("never-existed") is False


def test_delete_session_orphans_children_but_keeps_grandchildren_linked(db, make_session):
    make_session("parent", started=1.0, ended=2.0, reason="compression")
    make_session("child", started=3.0, parent="parent")
    make_session("sibling", started=4.0, parent="parent")
    make_session("grandchild", started=5.0, parent="child")
    db.append_message("child", "user", "child words")
    assert db.delete_session("parent") is True
    assert db.get_session("child")["parent_session_id"] is None
    assert db.get_session("sibling")["parent_session_id"] is None
    assert db.get_session("grandchild")["parent_session_id"] == "child"
    assert [m["content"] for m in db.get_messages("child")] == ["child words"]


def test_delete_child_leaves_parent(db, make_session):
    make_session("parent", started=1.0)
    make_session("child", started=2.0, parent="parent")
    assert db.delete_session("child") is True
    assert db.get_session("parent") is not None


def test_delete_session_removes_its_transcript_files(db, make_session, sessions_dir):
    make_session("abc", started=1.0)
    transcript_files(sessions_dir, "abc")
    others = transcript_files(sessions_dir, "abcd")
    (sessions_dir / "abc.txt").write_text("notes", encoding="utf-8")
    (sessions_dir / "request_dump_abc.json").write_text("{}", encoding="utf-8")
    assert db.delete_session("abc", sessions_dir=sessions_dir) is True
    assert remaining(sessions_dir) == sorted([*others, "abc.txt", "request_dump_abc.json"])


def test_delete_session_accepts_sessions_dir_as_str(db, make_session, sessions_dir):
    make_session("s1", started=1.0)
    transcript_files(sessions_dir, "s1")
    db.delete_session("s1", sessions_dir=str(sessions_dir))
    assert remaining(sessions_dir) == []


def test_delete_without_sessions_dir_keeps_files(db, make_session, sessions_dir):
    make_session("s1", started=1.0)
    names = transcript_files(sessions_dir, "s1")
    db.delete_session("s1")
    assert remaining(sessions_dir) == sorted(names)


def test_delete_with_missing_sessions_dir_is_fine(db, make_session, tmp_path):
    make_session("s1", started=1.0)
    assert db.delete_session("s1", sessions_dir=tmp_path / "not-there") is True


def test_failed_delete_touches_no_files(db, sessions_dir):
    names = transcript_files(sessions_dir, "ghost")
    assert db.delete_session("ghost", sessions_dir=sessions_dir) is False
    assert remaining(sessions_dir) == sorted(names)


def test_glob_characters_in_an_id_do_not_remove_other_dumps(db, make_session, sessions_dir):
    make_session("s*", started=1.0)
    others = transcript_files(sessions_dir, "s1")
    mine = transcript_files(sessions_dir, "s*")
    db.delete_session("s*", sessions_dir=sessions_dir)
    assert remaining(sessions_dir) == sorted(others)
    assert not set(mine) & set(remaining(sessions_dir))


@pytest.mark.parametrize("session_id", ["../outside", "nested/../../outside"])
def test_an_id_naming_another_directory_removes_nothing_there(db, make_session, sessions_dir, session_id):
    make_session(session_id, started=1.0)
    outside = sessions_dir.parent
    victims = [outside / "outside.json", outside / "outside.jsonl"]
    for victim in victims:
        victim.write_text("{}", encoding="utf-8")
    (sessions_dir / "nested").mkdir()  # so that nested/.. exists and the path resolves
    dump_dir = sessions_dir / "request_dump_.."
    dump_dir.mkdir()
    dump = dump_dir / "outside_1.json"
    dump.write_text("{}", encoding="utf-8")
    kept = transcript_files(sessions_dir, "s1")
    assert db.delete_session(session_id, sessions_dir=sessions_dir) is True
    assert all(victim.exists() for victim in victims)
    assert dump.exists()
    assert remaining(sessions_dir) == sorted([*kept, "nested", "request_dump_.."])


def test_an_absolute_id_removes_nothing_outside(db, make_session, sessions_dir, tmp_path):
    victim = tmp_path / "elsewhere.json"
    victim.write_text("{}", encoding="utf-8")
    session_id = str(tmp_path / "elsewhere")
    make_session(session_id, started=1.0)
    assert db.delete_session(session_id, sessions_dir=sessions_dir) is True
    assert victim.exists()


def test_prune_removes_nothing_outside_the_sessions_directory(db, make_session, sessions_dir):
    make_session("../outside", started=1.0, ended=2.0, reason="done")
    victim = sessions_dir.parent / "outside.json"
    victim.write_text("{}", encoding="utf-8")
    assert db.prune_sessions(older_than_days=1, sessions_dir=sessions_dir) == 1
    assert victim.exists()


# --- prune_sessions ------------------------------------------------------------------------------


@pytest.fixture
def now():
    return time.time()


def test_prune_removes_old_ended_sessions_only(db, make_session, now):
    make_session("old-ended", started=now - 120 * DAY, ended=now - 119 * DAY, reason="user_exit")
    make_session("old-live", started=now - 120 * DAY)
    make_session("new-ended", started=now - 10 * DAY, ended=now - 9 * DAY, reason="user_exit")
    db.append_message("old-ended", "user", "old words")
    assert db.prune_sessions() == 1
    assert db.get_session("old-ended") is None
    assert db.get_messages("old-ended") == []
    assert {row["id"] for row in db.search_sessions()} == {"old-live", "new-ended"}


def test_prune_takes_archived_sessions_too(db, make_session, raw, now):
    make_session("archived-old", started=now - 120 * DAY, ended=now - 119 * DAY, reason="user_exit")
    raw.execute("UPDATE sessions SET archived = 1 WHERE id = ?", ("archived-old",))
    assert db.prune_sessions() == 1
    assert db.get_session("archived-old") is None


def test_delete_session_answers_a_strict_bool(db, make_session):
    make_session("s", started=1.0)
    assert db.delete_session("s") is True
    assert db.delete_session("s") is False


def test_prune_measures_age_from_start_not_end(db, make_session, now):
    make_session("started-long-ago", started=now - 100 * DAY, ended=now - 1 * DAY, reason="user_exit")
    make_session("ended-long-ago", started=now - 30 * DAY, ended=now - 29 * DAY, reason="user_exit")
    assert db.prune_sessions(older_than_days=90) == 1
    assert db.get_session("started-long-ago") is None
    assert db.get_session("ended-long-ago") is not None


def test_prune_respects_older_than_days(db, make_session, now):
    make_session("s5", started=now - 5 * DAY, ended=now - 5 * DAY, reason="x")
    make_session("s15", started=now - 15 * DAY, ended=now - 15 * DAY, reason="x")
    assert db.prune_sessions(older_than_days=20) == 0
    assert db.prune_sessions(older_than_days=10) == 1
    assert db.prune_sessions(older_than_days=1) == 1
    assert db.session_count() == 0


@pytest.mark.parametrize("days", [float("nan"), float("inf"), float("-inf")], ids=str)
def test_prune_refuses_an_age_that_is_not_a_finite_number(db, make_session, now, days):
    make_session("old", started=now - 200 * DAY, ended=now - 200 * DAY, reason="x")
    make_session("new", started=now - DAY, ended=now, reason="x")
    with pytest.raises(ValueError, match="older_than_days must be a finite number of days"):
        db.prune_sessions(older_than_days=days)
    assert db.session_count() == 2


def test_prune_source_filter(db, make_session, now):
    make_session("cli-old", started=now - 200 * DAY, ended=now - 200 * DAY, reason="x", source="cli")
    make_session("tg-old", started=now - 200 * DAY, ended=now - 200 * DAY, reason="x", source="telegram")
    assert db.prune_sessions(source="telegram") == 1
    assert db.get_session("tg-old") is None
    assert db.get_session("cli-old") is not None
    assert db.prune_sessions(source="") == 1


def test_prune_nothing_returns_zero(db, make_session, now):
    assert db.prune_sessions() == 0
    make_session("fresh", started=now - DAY, ended=now, reason="x")
    assert db.prune_sessions() == 0


def test_prune_chain_example(db, make_session, now):
    # A -> B -> C -> D, all ended; A and B are old, C and D recent.
    make_session("A", started=now - 200 * DAY, ended=now - 199 * DAY, reason="compression")
    make_session("B", started=now - 199 * DAY, parent="A", ended=now - 198 * DAY, reason="compression")
    make_session("C", started=now - 5 * DAY, parent="B", ended=now - 4 * DAY, reason="compression")
    make_session("D", started=now - 4 * DAY, parent="C", ended=now - 3 * DAY, reason="user_exit")
    assert db.prune_sessions(older_than_days=90) == 2
    assert db.get_session("A") is None
    assert db.get_session("B") is None
    assert db.get_session("C")["parent_session_id"] is None
    assert db.get_session("D")["parent_session_id"] == "C"


def test_prune_removes_transcript_files(db, make_session, now, sessions_dir):
    make_session("gone", started=now - 200 * DAY, ended=now - 200 * DAY, reason="x")
    make_session("stays", started=now, ended=now, reason="x")
    transcript_files(sessions_dir, "gone")
    kept = transcript_files(sessions_dir, "stays")
    assert db.prune_sessions(sessions_dir=sessions_dir) == 1
    assert remaining(sessions_dir) == sorted(kept)


def test_prune_a_long_chain_of_many_sessions(db, now):
    # More sessions than any single IN (...) list would comfortably hold, each the parent
    # of the next, all old and ended, plus one recent child at the end of the chain.
    count = 1200
    old = now - 400 * DAY

    def insert(conn):
        conn.executemany(
            "INSERT INTO sessions (id, source, parent_session_id, started_at, ended_at, end_reason) "
            "VALUES (?, 'cli', ?, ?, ?, 'compression')",
            [(f"c{i:04d}", f"c{i - 1:04d}" if i else None, old + i, old + i + 0.5) for i in range(count)],
        )
        conn.executemany(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'user', 'old turn', ?)",
            [(f"c{i:04d}", old + i + 0.1) for i in range(count)],
        )

    db._execute_write(insert)
    db.create_session("survivor", "cli", parent_session_id=f"c{count - 1:04d}")
    assert db.prune_sessions() == count
    assert db.session_count() == 1
    assert db.message_count() == 0
    assert db.get_session("survivor")["parent_session_id"] is None
    assert db.search_messages("old") == []


# --- prune_empty_ghost_sessions ---------------------------------------------------------------------


@pytest.fixture
def ghost(db, make_session, now):
    def _ghost(session_id, **overrides):
        spec = {"started": now - 2 * DAY, "ended": now - 2 * DAY + 60, "reason": "user_exit", "source": "tui"}
        spec.update(overrides)
        return make_session(session_id, **spec)

    return _ghost


def test_ghost_sessions_are_pruned(db, ghost):
    ghost("g1")
    ghost("g2")
    assert db.prune_empty_ghost_sessions() == 2
    assert db.session_count() == 0


def test_non_ghosts_are_kept(db, ghost, now):
    ghost("real-ghost")
    ghost("cli-source", source="cli")
    ghost("titled")
    db.set_session_title("titled", "Named")
    ghost("still-live", ended=None, reason=None)
    ghost("recent", started=now - 3600.0)
    ghost("has-messages")
    db.append_message("has-messages", "user", "hello")
    assert db.prune_empty_ghost_sessions() == 1
    assert {row["id"] for row in db.search_sessions()} == {
        "cli-source",
        "titled",
        "still-live",
        "recent",
        "has-messages",
    }


def test_ghost_prune_returns_zero_when_nothing_matches(db):
    assert db.prune_empty_ghost_sessions() == 0


def test_ghost_prune_detaches_children(db, ghost, make_session, now):
    ghost("ghost-parent")
    make_session("child", started=now - DAY, parent="ghost-parent")
    db.append_message("child", "user", "I survive")
    assert db.prune_empty_ghost_sessions() == 1
    assert db.get_session("ghost-parent") is None
    assert db.get_session("child")["parent_session_id"] is None
    assert [m["content"] for m in db.get_messages("child")] == ["I survive"]


def test_ghost_prune_removes_transcripts_only_with_sessions_dir(db, ghost, sessions_dir):
    ghost("g1")
    ghost("g2")
    transcript_files(sessions_dir, "g1")
    names = transcript_files(sessions_dir, "g2")
    assert db.prune_empty_ghost_sessions(sessions_dir=sessions_dir) == 2
    assert remaining(sessions_dir) == []
    ghost("g3")
    names = transcript_files(sessions_dir, "g3")
    assert db.prune_empty_ghost_sessions() == 1
    assert remaining(sessions_dir) == sorted(names)


# --- export ----------------------------------------------------------------------------------------


def test_export_session(db, make_session):
    make_session("ex", started=10.0, model="m")
    db.append_message("ex", "user", [{"type": "text", "text": "hi"}])
    db.append_message("ex", "assistant", "hello", tool_calls=[{"id": "k"}])
    exported = db.export_session("ex")
    assert set(exported) == SESSION_KEYS | {"messages"}
    assert exported["model"] == "m"
    assert exported["messages"] == db.get_messages("ex")
    assert exported["messages"][0]["content"] == [{"type": "text", "text": "hi"}]
    assert exported["messages"][1]["tool_calls"] == [{"id": "k"}]


def test_export_missing_session(db):
    assert db.export_session("nope") is None


def test_export_all(db, make_session, raw):
    make_session("a", started=100.0, source="cli")
    make_session("b", started=200.0, source="telegram")
    make_session("c", started=300.0, source="cli", parent="a")
    raw.set_message_time(db.append_message("a", "user", "late"), 5000.0)
    rows = db.export_all()
    assert ids(rows) == ["a", "c", "b"]
    assert set(rows[0]) == SESSION_KEYS | {"last_active", "messages"}
    assert rows[0]["last_active"] == 5000.0
    assert [m["content"] for m in rows[0]["messages"]] == ["late"]
    assert rows[1]["messages"] == []
    assert ids(db.export_all(source="cli")) == ["a", "c"]
    assert db.export_all(source="discord") == []
