"""Deletes at upstream head: delegate sub-agents go with the session that spawned them
(delete_session, delete_sessions), delete_session_if_empty, count_empty_sessions /
delete_empty_sessions, finalize_orphaned_compression_sessions. Batched sweeps give the
same result as one transaction."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import event

from hermes_store import SessionDB
from hermes_store.repository import delegates, hygiene
from hermes_store.repository import sessions as session_rows

DAY = 86400.0


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of two sessions, so that a handful of sessions crosses batch boundaries."""
    monkeypatch.setattr(session_rows, "DELETE_BATCH", 2)


def delegate(make_session, session_id, parent, *, marker=None, started=10.0, **kwargs):
    """A sub-agent session tagged as upstream tags them (``_delegate_from``)."""
    config = {"_delegate_from": parent if marker is None else marker}
    return make_session(session_id, started=started, parent=parent, model_config=config, **kwargs)


def existing(db, *session_ids):
    return {session_id for session_id in session_ids if db.get_session(session_id) is not None}


def set_model_config(raw, session_id, text):
    raw.execute("UPDATE sessions SET model_config = ? WHERE id = ?", (text, session_id))


# --- delete_session: delegates go with their parent ------------------------------------------------


def test_delete_session_deletes_delegates_and_detaches_other_children(db, make_session):
    make_session("parent", started=1.0, ended=5.0, reason="compression")
    delegate(make_session, "worker", "parent")
    make_session("branch", started=6.0, parent="parent", model_config={"_branched_from": "parent"})
    make_session("continuation", started=7.0, parent="parent")
    for session_id in ("parent", "worker", "branch", "continuation"):
        db.append_message(session_id, "user", f"words of {session_id}")
    assert db.delete_session("parent") is True
    assert existing(db, "parent", "worker", "branch", "continuation") == {"branch", "continuation"}
    assert db.get_messages("worker") == []
    assert db.get_session("branch")["parent_session_id"] is None
    assert db.get_session("continuation")["parent_session_id"] is None
    assert db.message_count() == 2


def test_delete_session_follows_marker_chains(db, make_session):
    make_session("orchestrator", started=1.0)
    delegate(make_session, "lead", "orchestrator")
    delegate(make_session, "helper", "lead")
    delegate(make_session, "helper-of-helper", "helper")
    make_session("untagged-grandchild", started=20.0, parent="helper")
    db.append_message("helper-of-helper", "assistant", "deep work")
    assert db.delete_session("orchestrator") is True
    assert existing(db, "orchestrator", "lead", "helper", "helper-of-helper", "untagged-grandchild") == {
        "untagged-grandchild"
    }
    assert db.get_session("untagged-grandchild")["parent_session_id"] is None
    assert db.message_count() == 0


def test_a_marker_alone_or_any_marker_on_a_child_is_enough(db, make_session):
    make_session("parent", started=1.0)
    make_session("detached-delegate", started=2.0, model_config={"_delegate_from": "parent"})
    delegate(make_session, "child-tagged-elsewhere", "parent", marker="__orphaned__")
    make_session("stranger", started=3.0, model_config={"_delegate_from": "someone-else"})
    assert db.delete_session("parent") is True
    assert existing(db, "detached-delegate", "child-tagged-elsewhere", "stranger") == {"stranger"}


def test_a_marker_cycle_never_deletes_more_than_the_cycle(db, make_session, raw):
    make_session("a", started=1.0, model_config={"_delegate_from": "b"})
    make_session("b", started=2.0, model_config={"_delegate_from": "a"})
    make_session("bystander", started=3.0)
    db.append_message("a", "user", "a words")
    assert db.delete_session("a") is True
    assert existing(db, "a", "b", "bystander") == {"bystander"}


def test_children_without_a_marker_are_detached_not_deleted(db, make_session, raw):
    make_session("parent", started=1.0)
    make_session("null-marker", started=2.0, parent="parent", model_config={"_delegate_from": None})
    make_session("plain-config", started=3.0, parent="parent", model_config={"model": "m"})
    make_session("no-config", started=4.0, parent="parent")
    make_session("json-list", started=5.0, parent="parent")
    set_model_config(raw, "json-list", '["_delegate_from", "parent"]')
    make_session("nested", started=6.0, parent="parent", model_config={"inner": {"_delegate_from": "parent"}})
    assert db.delete_session("parent") is True
    kept = ("null-marker", "plain-config", "no-config", "json-list", "nested")
    assert existing(db, *kept) == set(kept)
    assert {db.get_session(session_id)["parent_session_id"] for session_id in kept} == {None}


def test_model_config_that_is_not_json_never_fails_a_delete(db, make_session, raw):
    # Text another program wrote: mentions the marker but does not parse (PostgreSQL's
    # cast of it fails, and the delete still finds the real delegates).
    make_session("parent", started=1.0)
    make_session("broken-child", started=2.0, parent="parent")
    set_model_config(raw, "broken-child", '{"_delegate_from": "parent"')
    make_session("broken-elsewhere", started=3.0)
    set_model_config(raw, "broken-elsewhere", "_delegate_from = parent")
    make_session("garbage", started=4.0, parent="parent")
    set_model_config(raw, "garbage", "not json at all")
    delegate(make_session, "worker", "parent")
    delegate(make_session, "worker-of-worker", "worker")
    assert db.delete_session("parent") is True
    assert existing(db, "broken-child", "broken-elsewhere", "garbage", "worker", "worker-of-worker") == {
        "broken-child",
        "broken-elsewhere",
        "garbage",
    }
    assert db.get_session("broken-child")["parent_session_id"] is None
    assert db.get_session("broken-child")["model_config"] == '{"_delegate_from": "parent"'


def test_delete_session_removes_the_delegates_transcripts(db, make_session, tmp_path):
    sessions_dir = tmp_path / "sessions"
    sessions_dir.mkdir()
    make_session("parent", started=1.0)
    delegate(make_session, "worker", "parent")
    make_session("branch", started=3.0, parent="parent")
    for session_id in ("parent", "worker", "branch"):
        (sessions_dir / f"{session_id}.jsonl").write_text("{}", encoding="utf-8")
    (sessions_dir / "request_dump_worker_1.json").write_text("{}", encoding="utf-8")
    assert db.delete_session("parent", sessions_dir=sessions_dir) is True
    assert sorted(path.name for path in sessions_dir.iterdir()) == ["branch.jsonl"]


def test_deleting_a_delegate_leaves_its_parent(db, make_session):
    make_session("parent", started=1.0)
    delegate(make_session, "worker", "parent")
    assert db.delete_session("worker") is True
    assert existing(db, "parent", "worker") == {"parent"}


def test_prune_does_not_cascade_delegates(db, make_session):
    now = time.time()
    make_session("old", started=now - 200 * DAY, ended=now - 200 * DAY, reason="done")
    delegate(make_session, "recent-worker", "old", started=now - DAY)
    assert db.prune_sessions(older_than_days=90) == 1
    assert db.get_session("recent-worker")["parent_session_id"] is None


@pytest.mark.parametrize(
    ("model_config", "marker"),
    [
        ('{"_delegate_from": "p"}', "p"),
        ('{"_delegate_from": 5}', "5"),
        ('{"_delegate_from": null}', None),
        ('{"other": 1}', None),
        ('["_delegate_from"]', None),
        ('"_delegate_from"', None),
        ('{"_delegate_from": "p"', None),
        ("", None),
        (None, None),
    ],
)
def test_marker_of(model_config, marker):
    assert delegates.marker_of(model_config) == marker


def sync_store(db):
    if not isinstance(db, SessionDB):
        pytest.skip("calls the repository through the sync store's unit of work")
    return db


@pytest.mark.parametrize("broken", [False, True], ids=["valid JSON", "a row that is not JSON"])
def test_collecting_delegates_never_returns_the_seeds_or_the_kept(db, make_session, raw, broken):
    store = sync_store(db)
    make_session("a", started=1.0, model_config={"_delegate_from": "b"})
    make_session("b", started=2.0, model_config={"_delegate_from": "a"})
    delegate(make_session, "c", "b")
    delegate(make_session, "kept", "a")
    delegate(make_session, "behind-kept", "kept")
    make_session("noise", started=3.0)
    if broken:
        set_model_config(raw, "noise", "{_delegate_from")
    with store.unit_of_work.read() as session:
        assert sorted(delegates.delegate_children(session, ["a"])) == ["b", "behind-kept", "c", "kept"]
        assert sorted(delegates.delegate_children(session, ["a"], keep={"kept"})) == ["b", "c"]
        assert sorted(delegates.delegate_children(session, ["a", "b"])) == ["behind-kept", "c", "kept"]
        assert delegates.delegate_children(session, ["", "noise"]) == []


# --- delete_sessions ---------------------------------------------------------------------------------


def test_delete_sessions_deletes_the_listed_ones_and_counts_what_existed(db, make_session):
    make_session("a", started=1.0)
    db.append_message("a", "user", "hi")
    make_session("b", started=2.0)
    make_session("c", started=3.0)
    assert db.delete_sessions(["a", "b", "ghost"]) == 2
    assert existing(db, "a", "b", "c") == {"c"}
    assert db.message_count() == 0


def test_delete_sessions_ignores_noise_and_duplicates(db, make_session):
    make_session("real", started=1.0)
    assert db.delete_sessions([]) == 0
    assert db.delete_sessions([None, "", 7]) == 0  # type: ignore[list-item]
    assert db.delete_sessions(["real", "real", None, ""]) == 1  # type: ignore[list-item]
    assert db.get_session("real") is None


def test_delete_sessions_refuses_a_single_string(db, make_session):
    make_session("a", started=1.0)
    with pytest.raises(TypeError, match="single string"):
        db.delete_sessions("abc")  # type: ignore[arg-type]
    assert db.get_session("a") is not None


def test_delete_sessions_deletes_live_and_archived_sessions_when_chosen(db, make_session, raw):
    make_session("archived", started=1.0, ended=2.0, reason="done")
    raw.execute("UPDATE sessions SET archived = 1 WHERE id = ?", ("archived",))
    make_session("live", started=3.0)
    assert db.delete_sessions(["archived", "live"]) == 2
    assert db.session_count() == 0


def test_delete_sessions_cascades_delegates_without_counting_them(db, make_session):
    make_session("parent", started=1.0)
    delegate(make_session, "worker", "parent")
    make_session("child", started=3.0, parent="parent")
    assert db.delete_sessions(["parent"]) == 1
    assert existing(db, "parent", "worker", "child") == {"child"}
    assert db.get_session("child")["parent_session_id"] is None


@pytest.mark.parametrize("batch", ["one batch", "batches of two"])
def test_a_listed_delegate_counts_as_listed(db, make_session, request, batch):
    if batch == "batches of two":
        request.getfixturevalue("small_batches")
    make_session("parent", started=1.0)
    delegate(make_session, "worker", "parent")
    delegate(make_session, "worker-of-worker", "worker")
    make_session("third", started=4.0)
    # "worker" is both listed and a delegate of a listed session: counted once, as listed.
    assert db.delete_sessions(["parent", "third", "worker"]) == 3
    assert existing(db, "parent", "worker", "worker-of-worker", "third") == set()


def test_a_marker_cycle_between_listed_sessions_deletes_both_once(db, make_session):
    make_session("a", started=1.0, model_config={"_delegate_from": "b"})
    make_session("b", started=2.0, model_config={"_delegate_from": "a"})
    assert db.delete_sessions(["a", "b"]) == 2
    assert db.session_count() == 0


def test_delete_sessions_in_batches_equals_one_transaction(db, make_session, small_batches, tmp_path):
    sessions_dir = tmp_path / "sessions"
    sessions_dir.mkdir()
    for index in range(7):
        make_session(f"s{index}", started=float(index), parent=f"s{index - 1}" if index else None)
        db.append_message(f"s{index}", "user", f"turn {index}")
        delegate(make_session, f"w{index}", f"s{index}", started=100.0 + index)
        (sessions_dir / f"s{index}.json").write_text("{}", encoding="utf-8")
        (sessions_dir / f"w{index}.json").write_text("{}", encoding="utf-8")
    make_session("survivor", started=50.0, parent="s6")
    assert db.delete_sessions([f"s{index}" for index in range(7)] + ["ghost"], sessions_dir=sessions_dir) == 7
    assert db.session_count() == 1
    assert db.get_session("survivor")["parent_session_id"] is None
    assert db.message_count() == 0
    assert list(sessions_dir.iterdir()) == []


def test_a_batch_that_fails_is_rolled_back_whole_and_the_earlier_ones_stay_done(
    db, make_session, small_batches, monkeypatch, tmp_path
):
    for index in range(4):
        make_session(f"s{index}", started=float(index))
        db.append_message(f"s{index}", "user", f"turn {index}")
        db.append_message(f"s{index}", "assistant", f"reply {index}")
        (tmp_path / f"s{index}.json").write_text("{}", encoding="utf-8")
    calls = []
    delete_requested = hygiene.delete_requested

    def failing_second_batch(db_, ids, requested):
        result = delete_requested(db_, ids, requested)
        calls.append(ids)
        if len(calls) == 2:
            raise RuntimeError("the disk went away")
        return result

    monkeypatch.setattr(hygiene, "delete_requested", failing_second_batch)
    with pytest.raises(RuntimeError, match="disk went away"):
        db.delete_sessions(["s0", "s1", "s2", "s3"], sessions_dir=tmp_path)
    assert existing(db, "s0", "s1", "s2", "s3") == {"s2", "s3"}
    assert [len(db.get_messages(f"s{index}")) for index in (2, 3)] == [2, 2]
    assert sorted(path.name for path in tmp_path.glob("*.json")) == ["s2.json", "s3.json"]


def test_delete_sessions_takes_more_ids_than_sqlite_binds_at_once(db, make_session):
    make_session("first", started=1.0)
    make_session("last", started=2.0)
    make_session("unlisted", started=3.0)
    ids = ["first", *(f"missing-{index}" for index in range(40_000)), "last"]
    assert db.delete_sessions(ids) == 2
    assert existing(db, "first", "last", "unlisted") == {"unlisted"}


def test_delete_sessions_removes_transcripts(db, make_session, tmp_path):
    make_session("s1", started=1.0)
    make_session("s2", started=2.0)
    (tmp_path / "s1.jsonl").write_text("")
    (tmp_path / "s2.json").write_text("{}")
    (tmp_path / "s3.json").write_text("{}")
    assert db.delete_sessions(["s1", "s2", "s3"], sessions_dir=tmp_path) == 2
    assert not (tmp_path / "s1.jsonl").exists()
    assert not (tmp_path / "s2.json").exists()
    assert (tmp_path / "s3.json").exists()  # no such session: its files are not ours to remove


# --- delete_session_if_empty -------------------------------------------------------------------------


def test_an_empty_untitled_session_is_discarded_even_when_live(db, make_session):
    make_session("ended", started=1.0, ended=2.0, reason="cli_close")
    make_session("live", started=3.0)
    assert db.delete_session_if_empty("ended") is True
    assert db.delete_session_if_empty("live") is True
    assert db.session_count() == 0


def test_a_session_with_anything_in_it_is_kept(db, make_session, raw):
    make_session("busy", started=1.0)
    db.append_message("busy", "user", "hello")
    make_session("undone", started=2.0)
    raw.execute("UPDATE messages SET active = 0 WHERE id = ?", (db.append_message("undone", "user", "oops"),))
    make_session("titled", started=3.0)
    db.set_session_title("titled", "Important plans")
    make_session("parent", started=4.0)
    make_session("child", started=5.0, parent="parent", source="tool")
    for session_id in ("busy", "undone", "titled", "parent"):
        assert db.delete_session_if_empty(session_id) is False
    assert db.session_count() == 5


def test_discarding_an_unknown_or_no_session_is_false(db):
    assert db.delete_session_if_empty("nope") is False
    assert db.delete_session_if_empty("") is False
    assert db.delete_session_if_empty(None) is False  # type: ignore[arg-type]


def test_discarding_removes_transcripts_only_when_deleted(db, make_session, tmp_path):
    make_session("empty", started=1.0)
    make_session("busy", started=2.0)
    db.append_message("busy", "user", "hello")
    for name in ("empty.json", "empty.jsonl", "busy.json"):
        (tmp_path / name).write_text("{}", encoding="utf-8")
    assert db.delete_session_if_empty("empty", sessions_dir=tmp_path) is True
    assert db.delete_session_if_empty("busy", sessions_dir=tmp_path) is False
    assert sorted(path.name for path in tmp_path.iterdir() if path.suffix.startswith(".json")) == [
        "busy.json"
    ]


# --- count_empty_sessions / delete_empty_sessions ----------------------------------------------------


def test_empty_sweep_takes_ended_unarchived_sessions_without_messages(db, make_session, raw):
    make_session("empty1", started=1.0, ended=2.0, reason="done")
    make_session("empty2", started=3.0, ended=4.0, reason="done")
    make_session("has-message", started=5.0, ended=6.0, reason="done")
    db.append_message("has-message", "user", "Hello")
    make_session("live", started=7.0)
    make_session("archived", started=8.0, ended=9.0, reason="done")
    raw.execute("UPDATE sessions SET archived = 1 WHERE id = ?", ("archived",))
    assert db.count_empty_sessions() == 2
    assert db.delete_empty_sessions() == 2
    assert existing(db, "empty1", "empty2", "has-message", "live", "archived") == {
        "has-message",
        "live",
        "archived",
    }
    assert db.count_empty_sessions() == 0
    assert db.delete_empty_sessions() == 0


def test_a_session_compacted_to_no_live_messages_keeps_its_history(db, make_session, raw):
    # Only archived (compacted) rows left and the live counter at zero: not empty.
    make_session("compacted", started=1.0, ended=2.0, reason="done")
    for text in ("first", "second"):
        message_id = db.append_message("compacted", "user", text)
        raw.execute("UPDATE messages SET active = 0, compacted = 1 WHERE id = ?", (message_id,))
    raw.execute("UPDATE sessions SET message_count = 0 WHERE id = ?", ("compacted",))
    assert db.count_empty_sessions() == 0
    assert db.delete_empty_sessions() == 0
    assert db.message_count("compacted") == 2


def test_a_stale_counter_does_not_hide_an_empty_session(db, make_session, raw):
    make_session("drifted", started=1.0, ended=2.0, reason="done")
    raw.execute("UPDATE sessions SET message_count = 3 WHERE id = ?", ("drifted",))
    assert db.count_empty_sessions() == 1
    assert db.delete_empty_sessions() == 1
    assert db.get_session("drifted") is None


def test_empty_sweep_detaches_children_delegates_included(db, make_session):
    make_session("empty-parent", started=1.0, ended=2.0, reason="done")
    make_session("child", started=3.0, parent="empty-parent", ended=4.0, reason="done")
    db.append_message("child", "user", "something")
    delegate(make_session, "worker", "empty-parent", started=5.0)
    db.append_message("worker", "assistant", "work")
    assert db.delete_empty_sessions() == 1
    assert db.get_session("empty-parent") is None
    assert db.get_session("child")["parent_session_id"] is None
    assert db.get_session("worker")["parent_session_id"] is None


def test_empty_sweep_in_batches(db, make_session, small_batches, tmp_path):
    for index in range(5):
        make_session(f"e{index}", started=float(index), ended=10.0, reason="done")
        (tmp_path / f"request_dump_e{index}_0.json").write_text("{}", encoding="utf-8")
    make_session("kept", started=20.0, ended=21.0, reason="done")
    db.append_message("kept", "user", "hi")
    assert db.count_empty_sessions() == 5
    assert db.delete_empty_sessions(sessions_dir=tmp_path) == 5
    assert db.session_count() == 1
    assert not list(tmp_path.glob("request_dump_*"))


def test_prune_in_batches_equals_one_transaction(db, make_session, small_batches):
    now = time.time()
    for index in range(5):
        make_session(
            f"old{index}",
            started=now - 200 * DAY + index,
            ended=now - 199 * DAY,
            reason="compression",
            parent=f"old{index - 1}" if index else None,
        )
        db.append_message(f"old{index}", "user", "old turn")
    make_session("recent", started=now - DAY, parent="old4")
    assert db.prune_sessions(older_than_days=90) == 5
    assert db.session_count() == 1
    assert db.message_count() == 0
    assert db.get_session("recent")["parent_session_id"] is None


def test_ghost_prune_in_batches(db, make_session, small_batches):
    now = time.time()
    for index in range(5):
        make_session(f"g{index}", started=now - 2 * DAY, ended=now - 2 * DAY, reason="x", source="tui")
    assert db.prune_empty_ghost_sessions() == 5
    assert db.session_count() == 0


# --- finalize_orphaned_compression_sessions ----------------------------------------------------------


@pytest.fixture
def continuation(db, make_session):
    """``continuation(id, parent_reason=…, messages=…, age_days=…, **session fields)``"""
    now = time.time()

    def _continuation(session_id, *, parent_reason="compression", messages=1, age_days=9.0, **fields):
        parent = f"{session_id}-parent"
        make_session(parent, started=now - 20 * DAY, ended=now - 19 * DAY, reason=parent_reason)
        make_session(session_id, started=now - age_days * DAY, parent=parent, **fields)
        for index in range(messages):
            db.append_message(session_id, "user", f"turn {index}")
        return session_id

    return _continuation


def test_an_old_unfinished_continuation_is_ended(db, continuation):
    continuation("ghost", messages=2)
    continuation("titled-ghost")
    db.set_session_title("titled-ghost", "Chat (2)")
    before = time.time()
    assert db.finalize_orphaned_compression_sessions() == 2
    for session_id in ("ghost", "titled-ghost"):
        row = db.get_session(session_id)
        assert row["end_reason"] == "orphaned_compression"
        assert row["ended_at"] >= before - 1
    assert db.message_count("ghost") == 2
    assert db.finalize_orphaned_compression_sessions() == 0


def test_only_stalled_compression_continuations_are_ended(db, continuation, make_session, raw):
    now = time.time()
    continuation("recent", age_days=6.0)
    continuation("no-messages", messages=0)
    continuation("user-parent", parent_reason="user_exit")
    continuation("called-the-model")
    raw.execute("UPDATE sessions SET api_call_count = 2 WHERE id = ?", ("called-the-model",))
    continuation("already-ended")
    db.end_session("already-ended", "user_exit")
    make_session("root", started=now - 9 * DAY)
    db.append_message("root", "user", "hello")
    make_session("open-parent", started=now - 20 * DAY)
    make_session("child-of-open", started=now - 9 * DAY, parent="open-parent")
    raw.execute("UPDATE sessions SET end_reason = 'compression' WHERE id = ?", ("open-parent",))
    db.append_message("child-of-open", "user", "hello")
    assert db.finalize_orphaned_compression_sessions() == 0


# --- no caller's value becomes SQL text --------------------------------------------------------------


def test_no_value_given_to_these_methods_is_part_of_any_statement(db, make_session):
    canary = "zz'); DROP TABLE sessions; --"
    make_session(canary, started=1.0, model_config={"_delegate_from": canary})
    make_session("parent", started=2.0)
    delegate(make_session, "worker", "parent", marker=canary)
    statements: list[str] = []

    @event.listens_for(db.engine, "before_cursor_execute")
    def _record(conn, cursor, statement, params, context, executemany):
        statements.append(statement)

    try:
        db.update_session_cwd(canary, canary, git_branch=canary, git_repo_root=canary)
        db.backfill_repo_roots({canary: canary})
        db.distinct_session_cwds(include_archived=True)
        db.update_session_meta(canary, canary, model=canary)
        db.update_session_model(canary, canary)
        db.update_session_billing_route(canary, provider=canary, base_url=canary, billing_mode=canary)
        db.delete_session_if_empty(canary)
        db.delete_sessions([canary, f"{canary}2"])
        db.delete_session("parent")
        db.count_empty_sessions()
        db.delete_empty_sessions()
        db.finalize_orphaned_compression_sessions()
    finally:
        event.remove(db.engine, "before_cursor_execute", _record)
    assert statements
    assert not [statement for statement in statements if "zz'" in statement or "DROP TABLE" in statement]
    assert db.session_count() == 0


def test_a_bulk_delete_sizes_its_batches_by_time(db, make_session, monkeypatch):
    """Slow batches (here every batch counts as too slow) shrink to one session each after the
    first, which holds at most BULK_FIRST_BATCH sessions: no batch holds the write lock long."""
    from test_retention import deletes_of_sessions

    from hermes_store.api.features import hygiene as hygiene_methods
    from hermes_store.api.features import sweeps

    monkeypatch.setattr(sweeps, "BATCH_TARGET_S", 0.0)
    ids = [make_session(f"bulk-{n:02d}", started=10.0 + n) for n in range(12)]
    seen = deletes_of_sessions(db)
    assert db.delete_sessions(ids) == 12
    assert len(seen) == 1 + (12 - hygiene_methods.BULK_FIRST_BATCH)
    assert db.session_count() == 0
