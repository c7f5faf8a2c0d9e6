"""state_meta key/value store, vacuum and maybe_auto_prune_and_vacuum."""

from __future__ import annotations

import time

import pytest

from hermes_store import SessionDB

DAY = 86400.0


# --- get_meta / set_meta -----------------------------------------------------------------------


def test_missing_key_reads_none(db):
    assert db.get_meta("never-set") is None


def test_set_and_get(db):
    assert db.set_meta("theme", "dark") is None
    assert db.get_meta("theme") == "dark"


def test_set_meta_overwrites(db):
    db.set_meta("counter", "1")
    db.set_meta("counter", "2")
    assert db.get_meta("counter") == "2"
    assert db._conn.execute("SELECT COUNT(*) FROM state_meta WHERE key = 'counter'").fetchone()[0] == 1


def test_keys_are_independent(db):
    db.set_meta("a", "alpha")
    db.set_meta("b", "beta")
    assert (db.get_meta("a"), db.get_meta("b")) == ("alpha", "beta")


def test_meta_values_keep_unicode_and_empty_strings(db):
    db.set_meta("greeting", "こんにちは 👋")
    db.set_meta("blank", "")
    assert db.get_meta("greeting") == "こんにちは 👋"
    assert db.get_meta("blank") == ""


def test_meta_survives_reopen(tmp_path):
    first = SessionDB(tmp_path / "state.db")
    first.set_meta("persisted", "yes")
    first.close()
    second = SessionDB(tmp_path / "state.db")
    try:
        assert second.get_meta("persisted") == "yes"
    finally:
        second.close()


# --- vacuum ------------------------------------------------------------------------------------


def test_vacuum_keeps_data(db, backend):
    db.create_session("v", "cli")
    db.append_message("v", "user", "still searchable after vacuum")
    # It reports how many FTS indexes it merged first (PostgreSQL's need no merging).
    assert db.vacuum() == (2 if backend == "sqlite" else 0)
    assert [m["content"] for m in db.get_messages("v")] == ["still searchable after vacuum"]
    assert [hit["session_id"] for hit in db.search_messages("searchable")] == ["v"]
    db.append_message("v", "assistant", "writes still work")
    assert db.message_count("v") == 2


def test_vacuum_reclaims_free_pages_after_a_large_delete(db, raw):
    db.create_session("big", "cli")
    db.replace_messages("big", [{"role": "user", "content": "x" * 4000 + str(i)} for i in range(300)])
    full_pages = raw.one("PRAGMA page_count")
    db.delete_session("big")
    assert raw.one("PRAGMA freelist_count") > 0
    db.vacuum()
    assert raw.one("PRAGMA freelist_count") == 0
    assert raw.one("PRAGMA page_count") < full_pages


# --- maybe_auto_prune_and_vacuum ---------------------------------------------------------------


def make_old_ended(db, raw, session_id, days_old=200):
    db.create_session(session_id, "cli")
    raw.set_started(session_id, time.time() - days_old * DAY)
    raw.set_ended(session_id, time.time() - days_old * DAY, "user_exit")


def test_first_run_prunes_vacuums_and_records(db, raw):
    make_old_ended(db, raw, "old-1")
    make_old_ended(db, raw, "old-2")
    db.create_session("fresh", "cli")
    before = time.time()
    assert db.maybe_auto_prune_and_vacuum() == {"skipped": False, "pruned": 2, "vacuumed": True}
    assert db.get_session("fresh") is not None
    assert db.session_count() == 1
    assert float(db.get_meta("last_auto_prune")) >= before


def test_second_run_within_interval_is_skipped(db, raw):
    db.maybe_auto_prune_and_vacuum()
    recorded = db.get_meta("last_auto_prune")
    make_old_ended(db, raw, "old")
    assert db.maybe_auto_prune_and_vacuum() == {"skipped": True, "pruned": 0, "vacuumed": False}
    assert db.get_session("old") is not None
    assert db.get_meta("last_auto_prune") == recorded


def test_nothing_to_prune_still_records_the_run(db):
    db.set_meta("last_auto_prune", str(time.time() - 48 * 3600))
    previous = db.get_meta("last_auto_prune")
    assert db.maybe_auto_prune_and_vacuum() == {"skipped": False, "pruned": 0, "vacuumed": False}
    assert db.get_meta("last_auto_prune") != previous


def test_run_after_the_interval_has_passed(db, raw):
    db.set_meta("last_auto_prune", str(time.time() - 25 * 3600))
    make_old_ended(db, raw, "old")
    assert db.maybe_auto_prune_and_vacuum() == {"skipped": False, "pruned": 1, "vacuumed": True}


def test_custom_min_interval(db, raw):
    db.set_meta("last_auto_prune", str(time.time() - 2 * 3600))
    assert db.maybe_auto_prune_and_vacuum(min_interval_hours=3)["skipped"] is True
    assert db.maybe_auto_prune_and_vacuum(min_interval_hours=1)["skipped"] is False


@pytest.mark.parametrize("stored", ["not-a-number", "", "12:30 yesterday"])
def test_unparsable_last_run_counts_as_never(db, raw, stored):
    db.set_meta("last_auto_prune", stored)
    make_old_ended(db, raw, "old")
    assert db.maybe_auto_prune_and_vacuum() == {"skipped": False, "pruned": 1, "vacuumed": True}
    assert float(db.get_meta("last_auto_prune")) > 0


def test_vacuum_false_skips_vacuum(db, raw):
    make_old_ended(db, raw, "old")
    assert db.maybe_auto_prune_and_vacuum(vacuum=False) == {"skipped": False, "pruned": 1, "vacuumed": False}


def test_retention_days(db, raw):
    make_old_ended(db, raw, "forty-days", days_old=40)
    make_old_ended(db, raw, "ten-days", days_old=10)
    assert db.maybe_auto_prune_and_vacuum(retention_days=30)["pruned"] == 1
    assert db.get_session("forty-days") is None
    assert db.get_session("ten-days") is not None


def test_sessions_dir_is_passed_to_prune(db, raw, tmp_path):
    sessions_dir = tmp_path / "sessions"
    sessions_dir.mkdir()
    (sessions_dir / "old.jsonl").write_text("{}\n", encoding="utf-8")
    (sessions_dir / "request_dump_old_1.json").write_text("{}", encoding="utf-8")
    (sessions_dir / "keep.jsonl").write_text("{}\n", encoding="utf-8")
    make_old_ended(db, raw, "old")
    assert db.maybe_auto_prune_and_vacuum(sessions_dir=sessions_dir)["pruned"] == 1
    assert sorted(p.name for p in sessions_dir.iterdir()) == ["keep.jsonl"]


def test_never_raises_and_reports_the_error(tmp_path):
    store = SessionDB(tmp_path / "state.db")
    store.close()
    result = store.maybe_auto_prune_and_vacuum()
    assert result["skipped"] is False
    assert result["pruned"] == 0
    assert result["vacuumed"] is False
    assert isinstance(result["error"], str)
    assert result["error"]
