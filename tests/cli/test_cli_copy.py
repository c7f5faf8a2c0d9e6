"""``hermes-store copy`` between SQLite files: exact, refuses a non-empty target, resumes.

The PostgreSQL side (COPY, deferred indexes, a SIGKILL mid-copy) is in
``tests/postgres/test_pg_copy.py``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import Result
from copy_support import assert_same_store, fill_head_extras, fill_store, make_old_store

from hermes_store.admin.transfer import copy_store, parents_first
from hermes_store.db.engine import create_engine
from hermes_store.errors import CopyRefused

Invoke = Callable[..., Result]


def _tables(path: Path) -> set[str]:
    with closing(sqlite3.connect(path)) as connection:
        return {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_copy_into_an_empty_sqlite_file_is_exact_and_searchable(
    invoke: Invoke, seeded_db: Path, tmp_path: Path
) -> None:
    target = tmp_path / "copy.db"
    summary = json.loads(invoke("copy", str(seeded_db), str(target), "--json", raw=True).output)
    # state_meta: none (the seeded file has none, and never used Telegram topic mode).
    assert (summary["sessions"], summary["messages"], summary["meta"]) == (8, 17, 0)
    assert summary["resumed_after_message_id"] is None
    assert summary["verified_searches"]
    assert_same_store(create_engine(seeded_db), create_engine(target))
    assert "hermes_copy_state" not in _tables(target)
    hits = json.loads(invoke("search", "docker", "--json", db=target).output)
    assert hits


def test_copy_refuses_a_target_that_holds_sessions(invoke: Invoke, seeded_db: Path, tmp_path: Path) -> None:
    target = tmp_path / "other.db"
    fill_store(target, 2, 3)
    before = target.read_bytes()
    result = invoke("copy", str(seeded_db), str(target), status=1, raw=True)
    assert result.output.strip().splitlines() == [
        "Error: the target already holds 2 session(s) and 6 message(s); copy only into an empty store: "
        "name a new file as the target"
    ]
    assert target.read_bytes() == before


class _Interrupt(Exception):
    """Raised by the test's progress function to stop a copy between two batches."""


def test_an_interrupted_copy_is_refused_without_resume_and_finished_with_it(tmp_path: Path) -> None:
    source_path, target_path = tmp_path / "source.db", tmp_path / "target.db"
    fill_store(source_path, 12, 10)
    source, target = create_engine(source_path), create_engine(target_path)

    def stop_after_three_batches(step: str, done: int, total: int | None) -> None:
        if step == "messages" and done >= 30:
            raise _Interrupt

    with pytest.raises(_Interrupt):
        copy_store(source, target, stop_after_three_batches, batch_rows=10)
    with closing(sqlite3.connect(target_path)) as connection:
        assert connection.execute("SELECT COUNT(*), MAX(id) FROM messages").fetchone() == (30, 30)
    with pytest.raises(CopyRefused, match=r"interrupted copy .* --resume"):
        copy_store(source, target)
    report = copy_store(source, target, resume=True, batch_rows=10)
    assert (report.sessions, report.messages, report.resumed_after) == (12, 120, 30)
    assert_same_store(source, target)
    assert "hermes_copy_state" not in _tables(target_path)


def test_resume_refuses_a_source_that_changed(tmp_path: Path) -> None:
    source_path, target_path = tmp_path / "source.db", tmp_path / "target.db"
    fill_store(source_path, 4, 10)
    source, target = create_engine(source_path), create_engine(target_path)

    def stop(step: str, done: int, total: int | None) -> None:
        if step == "messages" and done:
            raise _Interrupt

    with pytest.raises(_Interrupt):
        copy_store(source, target, stop, batch_rows=10)
    with closing(sqlite3.connect(source_path)) as connection, connection:
        connection.execute("DELETE FROM messages WHERE id = 40")
    with pytest.raises(CopyRefused, match="source has changed"):
        copy_store(source, target, resume=True)


def test_resume_of_a_store_that_was_not_a_copy_is_refused(seeded_db: Path, tmp_path: Path) -> None:
    target = tmp_path / "other.db"
    fill_store(target, 1, 1)
    with pytest.raises(CopyRefused, match="no interrupted copy in it to resume"):
        copy_store(create_engine(seeded_db), create_engine(target), resume=True)


def _session(session_id: str, parent: str | None) -> tuple[object, ...]:
    # Rows in model column order: id, source, user_id, model, model_config, system_prompt, parent.
    return (session_id, "cli", None, None, None, None, parent)


def test_parents_come_before_their_children() -> None:
    rows = [_session("c", "b"), _session("b", "a"), _session("x", None), _session("a", None)]
    assert [row[0] for row in parents_first(rows)] == ["x", "a", "b", "c"]
    with pytest.raises(CopyRefused, match="names parent 'gone'"):
        parents_first([_session("c", "gone")])
    with pytest.raises(CopyRefused, match="name each other as parents"):
        parents_first([_session("a", "b"), _session("b", "a")])


def test_verification_finds_a_target_whose_search_index_lacks_rows(tmp_path: Path) -> None:
    from hermes_store.admin.copy_verify import sample_words, verify_copy
    from hermes_store.domain.progress import ignore_progress
    from hermes_store.errors import CopyMismatch

    source_path, target_path = tmp_path / "source.db", tmp_path / "target.db"
    fill_store(source_path, 3, 10)
    source, target = create_engine(source_path), create_engine(target_path)
    copy_store(source, target)
    (_, message_id), *_ = sample_words(source)
    with closing(sqlite3.connect(target_path)) as connection, connection:
        connection.execute("DELETE FROM messages_fts WHERE rowid = ?", (message_id,))
    with pytest.raises(CopyMismatch, match="search indexes are incomplete"):
        verify_copy(source, target, ignore_progress)


def _revision(path: Path) -> str:
    with closing(sqlite3.connect(path)) as connection:
        return str(connection.execute("SELECT version_num FROM alembic_version").fetchone()[0])


def test_a_source_behind_head_is_read_as_it_is_and_never_migrated(invoke: Invoke, tmp_path: Path) -> None:
    source, target = tmp_path / "old.db", tmp_path / "copy.db"
    make_old_store(source, "0009")
    before = source.read_bytes()
    summary = json.loads(invoke("copy", str(source), str(target), "--json", raw=True).output)
    assert (summary["sessions"], summary["messages"]) == (2, 4)
    assert _revision(source) == "0009"
    assert source.read_bytes() == before
    with closing(sqlite3.connect(target)) as connection:
        # Columns the source lacks hold what a migration would have given them.
        assert connection.execute(
            "SELECT api_call_count, rewind_count, archived, session_key FROM sessions WHERE id = 'old-root'"
        ).fetchone() == (4, 0, 0, None)
        assert connection.execute(
            "SELECT observed, active, compacted, platform_message_id, codex_message_items FROM messages "
            "WHERE id = 2"
        ).fetchone() == (0, 1, 0, None, '[{"type": "x"}]')
        # The source's metadata (it never used Telegram topic mode: no topic table either).
        assert dict(connection.execute("SELECT key, value FROM state_meta")) == {"last_auto_prune": "99.5"}
        tables = connection.execute("SELECT name FROM sqlite_master WHERE name LIKE 'telegram_dm%'")
        assert tables.fetchall() == []
    invoke("verify", str(source), str(target), raw=True)
    assert _revision(source) == "0009"
    hits = json.loads(invoke("search", "meadow", "--json", db=target).output)
    assert [hit["id"] for hit in hits] == [3]


def test_a_source_newer_than_this_release_is_refused_in_one_line(invoke: Invoke, tmp_path: Path) -> None:
    source = tmp_path / "newer.db"
    fill_store(source, 1, 1)
    with closing(sqlite3.connect(source)) as connection, connection:
        connection.execute("UPDATE alembic_version SET version_num = '9999'")
    result = invoke("copy", str(source), str(tmp_path / "copy.db"), status=1, raw=True)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert "the source is at schema revision 9999, newer than this hermes-store" in lines[0]


def test_every_table_and_column_of_head_is_copied(tmp_path: Path) -> None:
    source_path, target_path = tmp_path / "source.db", tmp_path / "target.db"
    fill_store(source_path, 4, 5)
    fill_head_extras(source_path)
    source, target = create_engine(source_path), create_engine(target_path)
    copy_store(source, target, batch_rows=7)
    assert_same_store(source, target)
    with closing(sqlite3.connect(target_path)) as connection:
        assert connection.execute("SELECT COUNT(*) FROM telegram_dm_topic_bindings").fetchone() == (1,)


def test_restart_empties_an_interrupted_copy_of_a_source_that_changed(invoke: Invoke, tmp_path: Path) -> None:
    source_path, target_path = tmp_path / "source.db", tmp_path / "target.db"
    fill_store(source_path, 6, 10)
    fill_head_extras(source_path)
    source, target = create_engine(source_path), create_engine(target_path)

    def stop(step: str, done: int, total: int | None) -> None:
        if step == "messages" and done >= 20:
            raise _Interrupt

    with pytest.raises(_Interrupt):
        copy_store(source, target, stop, batch_rows=10)
    with closing(sqlite3.connect(source_path)) as connection, connection:
        connection.execute("DELETE FROM messages WHERE id = 60")
        connection.execute("UPDATE compression_locks SET holder = 'worker-2'")
    plain = invoke("copy", str(source_path), str(target_path), status=1, raw=True).output.strip()
    assert plain.splitlines() == [plain]
    assert plain == (
        "Error: the target holds an interrupted copy (6 sessions and 20 messages so far) of a source that "
        "has changed since; run the same copy with --restart to empty the target and copy again"
    )
    resumed = invoke(
        "copy", str(source_path), str(target_path), "--resume", status=1, raw=True
    ).output.strip()
    assert resumed.startswith("Error: the source has changed since the interrupted copy began")
    assert resumed.endswith("run the same copy with --restart to empty the target and copy again")
    summary = json.loads(
        invoke("copy", str(source_path), str(target_path), "--restart", "--json", raw=True).output
    )
    assert (summary["messages"], summary["restarted"]) == (59, True)
    assert_same_store(source, target)
    assert "hermes_copy_state" not in _tables(target_path)


def test_restart_never_empties_a_store_that_is_not_an_interrupted_copy(
    invoke: Invoke, tmp_path: Path
) -> None:
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    fill_store(source, 1, 1)
    fill_store(target, 2, 1)
    result = invoke("copy", str(source), str(target), "--restart", status=1, raw=True)
    assert "there is no interrupted copy in it to restart" in result.output
    with closing(sqlite3.connect(target)) as connection:
        assert connection.execute("SELECT COUNT(*) FROM sessions").fetchone() == (2,)


def test_a_legacy_upstream_file_is_copied_as_it_is(invoke: Invoke, legacy_v5: Path, tmp_path: Path) -> None:
    target = tmp_path / "copy.db"
    before = legacy_v5.read_bytes()
    invoke("copy", str(legacy_v5), str(target), raw=True)
    invoke("verify", str(legacy_v5), str(target), raw=True)
    assert legacy_v5.read_bytes() == before
    assert "alembic_version" not in _tables(legacy_v5)


def test_a_legacy_file_with_duplicate_titles_is_refused_in_one_line(invoke: Invoke, tmp_path: Path) -> None:
    from legacy_db import build_legacy_db, populate

    legacy = tmp_path / "legacy3.db"  # titles, before upstream made them unique
    build_legacy_db(legacy, 3)
    populate(legacy)
    with closing(sqlite3.connect(legacy)) as connection, connection:
        connection.execute("UPDATE sessions SET title = 'Same'")
    before = legacy.read_bytes()
    result = invoke("copy", str(legacy), str(tmp_path / "copy.db"), status=1, raw=True)
    assert result.output.strip().splitlines() == [
        "Error: the source holds session title 'Same' more than once, which the target's unique title "
        "index refuses; rename the duplicates in the source first"
    ]
    assert legacy.read_bytes() == before


def test_a_source_written_to_during_the_copy_fails_verification_and_restart_copies_it_again(
    tmp_path: Path,
) -> None:
    from hermes_store.errors import CopyMismatch

    source_path, target_path = tmp_path / "source.db", tmp_path / "target.db"
    fill_store(source_path, 3, 4)
    source, target = create_engine(source_path), create_engine(target_path)

    def write_to_the_source(step: str, done: int, total: int | None) -> None:
        if step == "verify" and done == 0:
            with closing(sqlite3.connect(source_path)) as connection, connection:
                connection.execute("UPDATE sessions SET title = 'Late' WHERE id = 's00002'")

    with pytest.raises(CopyMismatch) as failed:
        copy_store(source, target, write_to_the_source)
    assert str(failed.value) == (
        "the target does not match the source: sessions 's00002' column title: source 'Late', target None; "
        "was the source written to during the copy? run the same copy with --restart to copy it again"
    )
    assert "hermes_copy_state" in _tables(target_path)
    assert copy_store(source, target, restart=True).restarted
    assert_same_store(source, target)


def test_a_source_using_telegram_topic_mode_gives_the_target_its_topic_tables(tmp_path: Path) -> None:
    source, target = tmp_path / "source.db", tmp_path / "copy.db"
    fill_store(source, 3, 2)
    fill_head_extras(source)
    copy_store(create_engine(source), create_engine(target))
    assert_same_store(create_engine(source), create_engine(target))
    with closing(sqlite3.connect(target)) as connection:
        names = {name for (name,) in connection.execute("SELECT name FROM sqlite_master")}
        assert {
            "telegram_dm_topic_mode",
            "telegram_dm_topic_bindings",
            "idx_telegram_dm_topic_bindings_session",
            "idx_telegram_dm_topic_bindings_user",
        } <= names
        cascade = [
            row[6] for row in connection.execute("PRAGMA foreign_key_list(telegram_dm_topic_bindings)")
        ]
        assert cascade == ["CASCADE"]
