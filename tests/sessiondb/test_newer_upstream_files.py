"""A state.db that upstream Hermes 0.20.3 (schema 26) wrote, used by this store.

Upstream's real code builds the file (``release_files``); the store then reads it, writes
to it and is checked against what upstream's own readers say of the same file:

* system prompts are read through the shared ``system_prompts`` table, and a prompt the
  store writes is one upstream reads (and the other way round);
* sessions upstream hides are not listed;
* the journal mode the file had is the one it keeps;
* the external-content full-text indexes pass FTS5's integrity check after the store's
  writes, also when a trigger had gone missing (the store repairs it in the file's own
  layout) and beside a CJK index whose tokenizer this process cannot load (its triggers
  go, it is marked stale, and writes go on).
"""

from __future__ import annotations

import logging
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from release_files import build_release_file, copy_of, fts_integrity, journal_mode, master, run_release

from hermes_store import SessionDB
from hermes_store.schema.file_layout import CJK_TRIGGERS

pytestmark = pytest.mark.filterwarnings("ignore::hermes_store.schema.legacy.NewerSchemaWarning")


@pytest.fixture(scope="module")
def release_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    path = tmp_path_factory.mktemp("release") / "state.db"
    return path, build_release_file(path)


@pytest.fixture
def state_db(release_file: tuple[Path, dict[str, Any]], tmp_path: Path) -> Path:
    return copy_of(release_file[0], tmp_path)


def test_the_file_is_upstreams_newer_layout(state_db: Path) -> None:
    assert journal_mode(state_db) == "delete"
    assert "messages_fts_trigram_src" in master(state_db, "view")
    assert "content='messages'" in master(state_db, "table")["messages_fts"]


def test_prompts_are_read_as_upstream_reads_them(
    release_file: tuple[Path, dict[str, Any]], state_db: Path
) -> None:
    upstream_prompts = release_file[1]["prompts"]
    assert upstream_prompts["shared_a"] == "You are Hermes."
    with closing(sqlite3.connect(state_db)) as conn:  # upstream keeps the column empty
        assert conn.execute("SELECT COUNT(*) FROM sessions WHERE system_prompt IS NOT NULL").fetchone() == (
            0,
        )
    db = SessionDB(state_db)
    try:
        ours = {sid: (db.get_session(sid) or {}).get("system_prompt") for sid in upstream_prompts}
        assert ours == upstream_prompts
        assert (db.export_session("own") or {})["system_prompt"] == "Only mine."
        exported = {row["id"]: row["system_prompt"] for row in db.export_all()}
        assert exported["shared_b"] == "You are Hermes."
        listed = {row["id"]: row["system_prompt"] for row in db.list_sessions_rich(limit=50)}
        assert listed["shared_a"] == "You are Hermes."
    finally:
        db.close()


def test_prompts_the_store_writes_are_the_ones_upstream_reads(state_db: Path) -> None:
    db = SessionDB(state_db)
    try:
        db.update_system_prompt("own", "Changed by the store.")
        db.create_session("new_one", "cli", system_prompt="You are Hermes.")
        db.create_session("fresh", "cli", system_prompt="A brand new prompt.")
        assert (db.get_session("own") or {})["system_prompt"] == "Changed by the store."
    finally:
        db.close()
    seen = run_release(
        state_db,
        """
        ids = ("own", "new_one", "fresh", "shared_a")
        result = {sid: db.get_session(sid)["system_prompt"] for sid in ids}
        """,
    )
    assert seen == {
        "own": "Changed by the store.",
        "new_one": "You are Hermes.",
        "fresh": "A brand new prompt.",
        "shared_a": "You are Hermes.",
    }
    with closing(sqlite3.connect(state_db)) as conn:
        prompts = {row[0] for row in conn.execute("SELECT prompt FROM system_prompts")}
        inline = conn.execute("SELECT COUNT(*) FROM sessions WHERE system_prompt IS NOT NULL").fetchone()
    # One row per distinct prompt, none left over, none written inline.
    assert prompts == {"You are Hermes.", "Changed by the store.", "A brand new prompt.", "Hidden prompt."}
    assert inline == (0,)


def test_hidden_sessions_are_not_listed_but_counted(state_db: Path) -> None:
    upstream = run_release(
        state_db,
        """
        db.set_session_pinned("shared_a", True)  # pinning changes no default order upstream
        result = [[r['id'] for r in db.list_sessions_rich(limit=50)], db.session_count()]
        """,
    )
    db = SessionDB(state_db)
    try:
        listed = [row["id"] for row in db.list_sessions_rich(limit=50)]
        count = db.session_count()
    finally:
        db.close()
    assert "hidden" not in listed
    assert listed == upstream[0]
    assert count == upstream[1]


def test_writes_keep_the_journal_mode_and_the_indexes_sound(state_db: Path) -> None:
    db = SessionDB(state_db)
    try:
        db.append_message("own", role="user", content="another docker question 再部署")
        db.append_message("own", role="tool", content="tool says zebra", tool_name="terminal")
        db.delete_session("shared_b")
        hits = {hit["session_id"] for hit in db.search_messages("docker")}
    finally:
        db.close()
    assert journal_mode(state_db) == "delete"
    assert set(fts_integrity(state_db).values()) == {"ok"}
    assert "own" in hits and "shared_b" not in hits
    with closing(sqlite3.connect(state_db)) as conn:  # shared_b's prompt is still shared_a's
        assert conn.execute("SELECT COUNT(*) FROM system_prompts").fetchone() == (3,)
    db = SessionDB(state_db)
    try:
        db.delete_session("hidden")
    finally:
        db.close()
    with closing(sqlite3.connect(state_db)) as conn:
        assert {row[0] for row in conn.execute("SELECT prompt FROM system_prompts")} == {
            "You are Hermes.",
            "Only mine.",
        }
    found = run_release(state_db, "result = sorted({h['session_id'] for h in db.search_messages('zebra')})")
    assert found == ["own"]


def test_a_missing_trigger_is_repaired_in_the_files_layout(
    state_db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import hermes_state

    with closing(sqlite3.connect(state_db)) as conn:
        conn.execute("DROP TRIGGER messages_fts_delete")
        conn.execute("DROP TRIGGER messages_fts_trigram_insert")
        # Written while the triggers were gone: the indexes missed them.
        conn.execute(
            "INSERT INTO messages (session_id, role, content, timestamp, active) "
            "VALUES ('own', 'user', 'written meanwhile walrus', 1, 1)"
        )
        conn.commit()
    with caplog.at_level(logging.WARNING):
        db = hermes_state.SessionDB(state_db)
    try:
        db.delete_session("shared_a")
        db.append_message("own", role="user", content="after the repair 修复了")
        walrus = [hit["session_id"] for hit in db.search_messages("walrus")]
    finally:
        db.close()
    assert set(fts_integrity(state_db).values()) == {"ok"}
    assert journal_mode(state_db) == "delete"
    assert walrus == ["own"]
    triggers = master(state_db, "trigger")
    assert "'delete'" in triggers["messages_fts_delete"]
    assert "role <> 'tool'" in triggers["messages_fts_trigram_insert"]
    # Upstream, opening it next, finds its index whole.
    found = run_release(state_db, "result = sorted({h['session_id'] for h in db.search_messages('修复')})")
    assert found == ["own"]
    assert set(fts_integrity(state_db).values()) == {"ok"}


def test_a_newer_layout_is_left_to_hermes_in_one_line(
    state_db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import hermes_state

    with closing(sqlite3.connect(state_db)) as conn:
        conn.execute("DROP TRIGGER messages_fts_update")
        conn.execute("UPDATE state_meta SET value = '3' WHERE key = 'fts_storage_version'")
        conn.commit()
    before = master(state_db, "trigger")
    with caplog.at_level(logging.WARNING):
        hermes_state.SessionDB(state_db).close()
    assert master(state_db, "trigger") == before
    lines = [r.getMessage() for r in caplog.records if "full-text index lacks" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert "layout 3" in lines[0] and "open the file once with the Hermes" in lines[0]


def _declare_cjk_index(path: Path) -> None:
    """Upstream's optional CJK index as a Hermes with the ``cjk_unicode61`` tokenizer leaves
    it: declared with that tokenizer, with its three triggers (this process cannot load it)."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute(
            "INSERT INTO sqlite_master (type, name, tbl_name, rootpage, sql) VALUES ('table', "
            "'messages_fts_cjk', 'messages_fts_cjk', 0, 'CREATE VIRTUAL TABLE messages_fts_cjk USING "
            "fts5(content, content=''messages'', content_rowid=''id'', tokenize=''cjk_unicode61'')')"
        )
        conn.commit()
    with closing(sqlite3.connect(path)) as conn:
        for name, event in zip(CJK_TRIGGERS, ("INSERT", "DELETE", "UPDATE OF content"), strict=True):
            row = "old" if event == "DELETE" else "new"
            conn.execute(
                f"CREATE TRIGGER {name} AFTER {event} ON messages BEGIN "
                f"INSERT INTO messages_fts_cjk(rowid, content) VALUES ({row}.id, {row}.content); END"
            )
        conn.commit()


def test_beside_an_unloadable_cjk_index_writes_go_on(state_db: Path) -> None:
    _declare_cjk_index(state_db)
    with (
        closing(sqlite3.connect(state_db)) as conn,
        pytest.raises(sqlite3.OperationalError, match="tokenizer"),
    ):
        conn.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('own', 'user', 'x', 1)"
        )
    db = SessionDB(state_db)
    try:
        db.append_message("own", role="user", content="still written 还能写")
        assert db.get_messages("own")[-1]["content"] == "still written 还能写"
    finally:
        db.close()
    assert not set(CJK_TRIGGERS) & set(master(state_db, "trigger"))
    with closing(sqlite3.connect(state_db)) as conn:
        assert conn.execute("SELECT value FROM state_meta WHERE key = 'fts_cjk_stale'").fetchone() == ("1",)
    assert journal_mode(state_db) == "delete"


def test_analytics_models_read_what_upstream_added(
    release_file: tuple[Path, dict[str, Any]], state_db: Path
) -> None:
    from sqlalchemy import func, orm, select
    from sqlalchemy.orm import aliased

    from hermes_store import create_engine
    from hermes_store.models import Session, SystemPrompt, UpstreamSession

    engine = create_engine(state_db)
    try:
        with orm.Session(engine) as session:
            prompts = dict(session.execute(select(UpstreamSession.id, UpstreamSession.prompt)).all())
            upstream = aliased(UpstreamSession)
            visible = (
                session.execute(
                    select(Session.id)
                    .join(Session.upstream.of_type(upstream))
                    .where(upstream.hidden == 0, upstream.pinned == 1)
                )
                .scalars()
                .all()
            )
            shared = session.scalar(select(func.count()).select_from(SystemPrompt))
            row = session.get(Session, "own")
            assert row is not None and row.upstream.prompt == "Only mine."
    finally:
        engine.dispose()
    assert prompts == release_file[1]["prompts"]
    assert visible == ["pinned"]
    assert shared == 3
    assert journal_mode(state_db) == "delete"


def test_info_names_the_layout_and_what_the_store_does_with_it(state_db: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from hermes_store.cli import cli

    newer = CliRunner().invoke(cli, ["--db", str(state_db), "info", "--json"])
    assert newer.exit_code == 0, newer.output
    import json

    layout = json.loads(newer.stdout)["layout"]
    assert layout["schema_version"] == 26 and layout["fts_layout"] == 1 and layout["shared_prompts"]
    assert "session_turn_leases" in layout["other_tables"]
    assert "prompts read from and written to system_prompts" in layout["handling"]
    own = tmp_path / "own.db"
    SessionDB(own).close()
    ours = CliRunner().invoke(cli, ["--db", str(own), "info"])
    assert "full-text layout 0 (inline)" in ours.stdout
    assert "its own layout" in ours.stdout


def test_doctor_checks_the_newer_layout_without_touching_it(state_db: Path) -> None:
    from click.testing import CliRunner

    from hermes_store.cli import cli

    before = state_db.read_bytes()
    checked = CliRunner().invoke(cli, ["--db", str(state_db), "doctor", "--json"])
    import json

    findings = {item["check"]: item for item in json.loads(checked.stdout)["findings"]}
    assert findings["fts:messages_fts"]["status"] == "ok"
    assert "layout 1" in findings["fts:messages_fts_trigram"]["detail"]
    assert "schema_version 26" in findings["schema"]["detail"]
    assert state_db.read_bytes() == before


def test_copy_refuses_in_one_line_naming_what_it_cannot_carry_and_backup_keeps_it(
    state_db: Path, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from hermes_store.cli import cli

    refused = CliRunner().invoke(cli, ["copy", str(state_db), str(tmp_path / "copy.db")])
    assert refused.exit_code != 0
    line = refused.stderr.strip()
    assert (
        "\n" not in line and "system_prompts" in line and "session_model_usage" in line and "backup" in line
    )
    assert not (tmp_path / "copy.db").exists() or SessionDB(tmp_path / "copy.db").session_count() == 0
    backed = CliRunner().invoke(cli, ["--db", str(state_db), "backup", str(tmp_path / "backup.db")])
    assert backed.exit_code == 0, backed.output
    with closing(sqlite3.connect(tmp_path / "backup.db")) as conn:
        assert conn.execute("SELECT COUNT(*) FROM system_prompts").fetchone() == (3,)
        assert conn.execute("SELECT COUNT(*) FROM sessions WHERE hidden = 1").fetchone() == (1,)


@pytest.fixture
def schema_30_db(state_db: Path) -> Path:
    from release_files import as_schema_30

    as_schema_30(state_db)
    assert set(fts_integrity(state_db).values()) == {"ok"}
    return state_db


def test_a_schema_30_file_is_read_and_written_without_damage(
    release_file: tuple[Path, dict[str, Any]], schema_30_db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import hermes_state

    with caplog.at_level(logging.WARNING):
        db = hermes_state.SessionDB(schema_30_db)
    try:
        prompts = {
            sid: (db.get_session(sid) or {}).get("system_prompt") for sid in release_file[1]["prompts"]
        }
        listed = {row["id"] for row in db.list_sessions_rich(limit=50)}
        db.append_message("own", role="tool", content="x" * 9000 + " narwhal", tool_name="terminal")
        db.append_message("own", role="user", content="a newer layout 新しい配置")
        db.update_system_prompt("own", "Thirty.")
        db.delete_session("shared_b")
        words = {hit["session_id"] for hit in db.search_messages("docker")}
        cjk = {hit["session_id"] for hit in db.search_messages("配置")}
    finally:
        db.close()
    assert prompts == release_file[1]["prompts"]
    assert "hidden" not in listed
    assert words == {"shared_a", "own", "pinned", "hidden"} and cjk == {"own"}
    assert set(fts_integrity(schema_30_db).values()) == {"ok"}
    assert journal_mode(schema_30_db) == "delete"
    with closing(sqlite3.connect(schema_30_db)) as conn:
        orders = conn.execute("SELECT COUNT(*) FROM messages WHERE display_order IS NULL").fetchone()
        prompt = conn.execute(
            "SELECT p.prompt FROM sessions s JOIN system_prompts p ON p.hash = s.system_prompt_hash "
            "WHERE s.id = 'own'"
        ).fetchone()
    assert orders == (0,) and prompt == ("Thirty.",)
    assert not [r for r in caplog.records if "full-text index lacks" in r.getMessage()]


def test_a_schema_30_file_missing_a_trigger_is_left_to_hermes(
    schema_30_db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import hermes_state

    with closing(sqlite3.connect(schema_30_db)) as conn:
        conn.execute("DROP TRIGGER messages_fts_trigram_delete")
        conn.commit()
    before = {kind: master(schema_30_db, kind) for kind in ("table", "trigger", "view")}
    with caplog.at_level(logging.WARNING):
        hermes_state.SessionDB(schema_30_db).close()
    assert {kind: master(schema_30_db, kind) for kind in ("table", "trigger", "view")} == before
    assert set(fts_integrity(schema_30_db).values()) == {"ok"}
    assert any("layout 3" in r.getMessage() for r in caplog.records)


_TOKEN_UPDATES: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("own", (100, 20), {"model": "m2", "billing_provider": "p", "api_call_count": 1}),
    ("own", (5, 1), {"model": "m2", "billing_provider": "p", "api_call_count": 1}),
    ("shared_a", (7, 3), {}),  # no route given: the session's own
    ("shared_a", (1000, 1000), {"absolute": True}),  # totals: upstream records no route row
]


def _usage_rows(path: Path) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(
            "SELECT session_id, model, billing_provider, billing_base_url, billing_mode, task, "
            "api_call_count, input_tokens, output_tokens, cache_read_tokens, estimated_cost_usd "
            "FROM session_model_usage ORDER BY session_id, model"
        ).fetchall()


def test_token_updates_reach_per_model_usage_as_upstreams_do(state_db: Path, tmp_path: Path) -> None:
    theirs = copy_of(state_db, tmp_path, "theirs.db")
    calls = [f"db.update_token_counts({sid!r}, *{args!r}, **{kw!r})" for sid, args, kw in _TOKEN_UPDATES]
    run_release(theirs, "\n".join(calls))
    db = SessionDB(state_db)
    try:
        for session_id, args, keywords in _TOKEN_UPDATES:
            db.update_token_counts(session_id, *args, **keywords)
    finally:
        db.close()
    assert _usage_rows(state_db) == _usage_rows(theirs)
    assert ("own", "m2", "p", "", "", "", 2, 105, 21, 0, 0.0) in _usage_rows(state_db)
