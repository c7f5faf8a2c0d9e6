"""Security: private files, no symlink tricks, no user value ever spliced into SQL.

* The database and its ``-wal``/``-shm`` sidecars are created 0600 whatever the umask,
  and the directories the store creates are 0700 (never group- or world-writable).
* A symbolic link planted at the database path — or at a sidecar's path — is never
  followed: the file it points at is left byte-for-byte as it was.
* A path is a path: odd characters (quotes, ``?``, ``#``, ``%``, a ``file:`` prefix) never
  turn it into a SQLite URI or another file.
* No user-supplied value (ids, titles, sources, queries, content, metadata keys…) ever
  appears in the text of a SQL statement: every statement the store sends to SQLite is
  recorded at the driver and searched for a canary carried by every argument.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _harness import WORKERS, worker_env

from hermes_store import ReadOnlyStore, StoreError, UnsafePath
from hermes_store.api.session_db import SessionDB
from hermes_store.db.engine import create_engine


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- permissions ---------------------------------------------------------------------------


@pytest.mark.parametrize("umask", [0o022, 0o000, 0o077, 0o002], ids=oct)
def test_created_files_are_owner_only_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    db = tmp_path / "home" / "profiles" / "work" / "state.db"
    result = subprocess.run(
        [sys.executable, str(WORKERS), "open_with_umask", json.dumps({"db": str(db), "umask": umask})],
        env=worker_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    modes = json.loads(result.stdout)
    assert set(modes) == {"", "-wal", "-shm"}, "the sidecars must exist while the store is open"
    assert {suffix: oct(value) for suffix, value in modes.items()} == {
        "": "0o600",
        "-wal": "0o600",
        "-shm": "0o600",
    }
    assert mode(db) == 0o600
    for directory in (db.parent, db.parent.parent, db.parent.parent.parent):
        assert mode(directory) & 0o022 == 0, f"{directory} is {oct(mode(directory))}"
    assert mode(db.parent) == 0o700


def test_an_existing_database_keeps_working_and_stays_private(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    with SessionDB(db) as store:
        store.create_session("s", "cli")
        store.append_message("s", "user", "hello")
    assert mode(db) == 0o600
    with SessionDB(db) as store:
        assert store.message_count("s") == 1
    assert mode(db) == 0o600


# --- symbolic links --------------------------------------------------------------------------


@pytest.fixture
def victims(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """Files an attacker would like the store to overwrite: text, an empty file, a database."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    text = elsewhere / "notes.txt"
    text.write_text("precious notes\n")
    empty = elsewhere / "empty"
    empty.touch()
    database = elsewhere / "other.db"
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE precious (x)")
        conn.execute("INSERT INTO precious VALUES ('keep me')")
    conn.close()
    yield {"text": text, "empty": empty, "database": database, "dangling": elsewhere / "not-there"}


@pytest.mark.parametrize("kind", ["text", "empty", "database", "dangling"])
def test_symlink_at_the_database_path_is_refused(tmp_path: Path, victims: dict[str, Path], kind: str) -> None:
    target = victims[kind]
    before = digest(target) if target.exists() else None
    link = tmp_path / "state.db"
    link.symlink_to(target)
    with pytest.raises(UnsafePath) as info:
        SessionDB(link)
    assert "symbolic link" in str(info.value)
    with pytest.raises(UnsafePath):
        SessionDB(url=f"sqlite:///{link}")
    assert (digest(target) if target.exists() else None) == before
    assert not Path(f"{link}-wal").exists() and not Path(f"{link}-shm").exists()


def test_symlinked_sidecars_are_not_followed(tmp_path: Path, victims: dict[str, Path]) -> None:
    db = tmp_path / "state.db"
    Path(f"{db}-wal").symlink_to(victims["text"])
    Path(f"{db}-shm").symlink_to(victims["empty"])
    before = {name: digest(path) for name, path in victims.items() if path.exists()}
    try:
        with SessionDB(db) as store:
            store.create_session("s", "cli")
            store.append_message("s", "user", "hello")
    except Exception:
        pass  # refusing is fine; writing through the links is not
    assert {name: digest(path) for name, path in victims.items() if path.exists()} == before


def test_symlinked_sidecars_are_reported_as_a_store_error(tmp_path: Path, victims: dict[str, Path]) -> None:
    """If planted sidecar links stop the store from opening, it says so in its own terms."""
    db = tmp_path / "state.db"
    Path(f"{db}-wal").symlink_to(victims["text"])
    Path(f"{db}-shm").symlink_to(victims["empty"])
    try:
        with SessionDB(db) as store:
            store.create_session("s", "cli")
    except StoreError as exc:
        assert isinstance(exc, UnsafePath | ReadOnlyStore), exc
    except Exception as exc:
        pytest.fail(f"planted sidecar links gave {type(exc).__module__}.{type(exc).__name__}: {exc}")


def test_a_path_that_starts_with_file_colon_is_a_plain_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, victims: dict[str, Path]
) -> None:
    """``file:notes.db`` given as a path is the file of that name, protected like any other."""
    monkeypatch.chdir(tmp_path)
    with SessionDB(Path("file:notes.db")) as store:
        store.create_session("s", "cli")
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["file:notes.db"]
    assert mode(tmp_path / "file:notes.db") == 0o600
    (tmp_path / "file:notes.db").unlink()
    (tmp_path / "file:notes.db").symlink_to(victims["empty"])
    with pytest.raises(UnsafePath):
        SessionDB(Path("file:notes.db"))
    assert victims["empty"].stat().st_size == 0


ODD_NAMES = [
    'it\'s "quoted"',
    "query?mode=ro&cache=shared",
    "fragment#x",
    "percent %41 %%",
    "semi;colon -- comment",
    "back\\slash",
    "空 格 and ünïcödé",
]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_odd_characters_in_the_path_are_just_characters(tmp_path: Path, name: str) -> None:
    folder = tmp_path / name
    db = folder / "state.db"
    for target in (db, str(db)):
        with SessionDB(target) as store:
            store.create_session("s", "cli")
            store.append_message("s", "user", "hello")
            assert store.message_count("s") >= 1
    assert [p.name for p in tmp_path.iterdir()] == [name]
    assert sorted(p.name for p in folder.iterdir()) == ["state.db"]
    assert mode(db) == 0o600
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 2
    conn.close()


# --- no user value in SQL text ---------------------------------------------------------------

CANARY = "zqxcanary"
STATEMENTS: list[tuple[str, str]] = []


class RecordingCursor(sqlite3.Cursor):
    def execute(self, sql: str, parameters: Any = (), /) -> RecordingCursor:
        STATEMENTS.append((sql, repr(parameters)))
        return super().execute(sql, parameters)

    def executemany(self, sql: str, seq: Any, /) -> RecordingCursor:
        rows = list(seq)
        STATEMENTS.append((sql, repr(rows)))
        return super().executemany(sql, rows)

    def executescript(self, script: str, /) -> RecordingCursor:
        STATEMENTS.append((script, ""))
        return super().executescript(script)


class RecordingConnection(sqlite3.Connection):
    """Records every statement text (and, apart, its parameters) sent through the driver."""

    def cursor(self, factory: Any = RecordingCursor) -> Any:
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        STATEMENTS.append((sql, repr(parameters)))
        return super().execute(sql, parameters)

    def executemany(self, sql: str, seq: Any, /) -> sqlite3.Cursor:
        rows = list(seq)
        STATEMENTS.append((sql, repr(rows)))
        return super().executemany(sql, rows)

    def executescript(self, script: str, /) -> sqlite3.Cursor:
        STATEMENTS.append((script, ""))
        return super().executescript(script)


def evil(tag: str) -> str:
    return f"{CANARY}{tag}' OR '1'='1\"; DROP TABLE sessions; -- %_\\"


def exercise_every_public_method(store: SessionDB) -> None:
    sid, child = evil("sid"), evil("child")
    store.create_session(
        sid,
        evil("source"),
        model=evil("model"),
        model_config={"k": evil("config")},
        system_prompt=evil("prompt"),
        user_id=evil("user"),
    )
    store.create_session(child, "cli", parent_session_id=sid)
    store.ensure_session(evil("ensured"), evil("source2"), model=evil("model2"))
    store.append_message(
        sid,
        evil("role"),
        evil("content") + " payload",
        tool_name=evil("tool"),
        tool_calls=[{"id": evil("call"), "function": {"name": evil("fn"), "arguments": evil("args")}}],
        tool_call_id=evil("callid"),
        token_count=3,
        finish_reason=evil("finish"),
        reasoning=evil("reasoning"),
        reasoning_content=evil("rcontent"),
        reasoning_details=[{"x": evil("details")}],
        codex_reasoning_items=[evil("codexr")],
        codex_message_items=[evil("codexm")],
    )
    store.append_message(child, "user", [{"type": "text", "text": evil("multimodal")}])
    store.append_message(child, "assistant", f"{CANARY} 记忆断裂问题")
    store.update_system_prompt(sid, evil("prompt2"))
    store.update_token_counts(
        sid,
        1,
        2,
        model=evil("model3"),
        cost_status=evil("status"),
        cost_source=evil("csource"),
        pricing_version=evil("pricing"),
        billing_provider=evil("provider"),
        billing_base_url=evil("url"),
        billing_mode=evil("mode"),
    )
    store.update_token_counts(evil("tokens-new"), 1, absolute=True)
    title = evil("title")[:90]
    store.set_session_title(sid, title)
    store.get_session_title(sid)
    store.get_session_by_title(title)
    store.resolve_session_by_title(title)
    store.get_next_title_in_lineage(title)
    store.resolve_session_id(evil("prefix"))
    store.resolve_session_id(sid[:14])
    store.get_compression_tip(sid)
    store.resolve_resume_session_id(sid)
    store.get_ancestors(child)
    store.get_descendants(sid)
    store.get_session(sid)
    store.get_messages(sid)
    store.get_messages_as_conversation(child, include_ancestors=True)
    store.list_sessions_rich(source=evil("source"), exclude_sources=[evil("exclude")])
    store.list_sessions_rich(source=evil("source"), order_by_last_active=True, include_children=True)
    store.search_sessions(source=evil("source"))
    store.session_count(evil("source"))
    store.message_count(sid)
    for query in (evil("query"), f"{CANARY}记忆断裂", f"{CANARY}记忆", f'"{CANARY}" OR {CANARY}*', CANARY):
        store.search_messages(
            query, source_filter=[evil("only")], exclude_sources=[evil("not")], role_filter=[evil("role")]
        )
        store.search_messages(query)
    store.export_session(sid)
    store.export_all(source=evil("source"))
    store.set_meta(evil("key"), evil("value"))
    store.get_meta(evil("key"))
    store.replace_messages(child, [{"role": "user", "content": evil("replaced")}])
    store.end_session(sid, evil("reason"))
    store.reopen_session(sid)
    store.end_session(sid, evil("reason2"))
    store.clear_messages(child)
    store.delete_session(child)
    store.prune_sessions(older_than_days=0, source=evil("source"))
    store.prune_empty_ghost_sessions()


def test_no_user_value_is_ever_part_of_sql_text(tmp_path: Path) -> None:
    engine = create_engine(tmp_path / "state.db", connect_args={"factory": RecordingConnection})
    STATEMENTS.clear()
    store = SessionDB(engine=engine)
    try:
        exercise_every_public_method(store)
    finally:
        store.close()
    assert len(STATEMENTS) > 50, "the recorder saw too little; is the factory in use?"
    carried = [params for _, params in STATEMENTS if CANARY in params]
    assert carried, "no canary reached SQLite as a bound value; the recorder is not seeing the writes"
    spliced = [sql for sql, _ in STATEMENTS if CANARY in sql.lower()]
    assert spliced == [], f"user values spliced into SQL: {spliced[:3]}"


def test_hostile_values_are_stored_verbatim(tmp_path: Path) -> None:
    with SessionDB(tmp_path / "state.db") as store:
        sid = evil("sid")
        store.create_session(sid, evil("source"))
        store.append_message(sid, "user", evil("content"))
        store.set_meta(evil("key"), evil("value"))
        assert store.get_session(sid)["source"] == evil("source")  # type: ignore[index]
        assert store.get_messages(sid)[0]["content"] == evil("content")
        assert store.get_meta(evil("key")) == evil("value")
        assert store.session_count() == 1
    with sqlite3.connect(tmp_path / "state.db") as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert {"sessions", "messages", "state_meta"} <= tables


def test_environment_is_not_consulted_for_an_explicit_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An explicit path wins over HERMES_STORE_URL / HERMES_HOME (no surprise redirection)."""
    monkeypatch.setenv("HERMES_STORE_URL", f"sqlite:///{tmp_path / 'elsewhere.db'}")
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    with SessionDB(tmp_path / "state.db") as store:
        store.create_session("s", "cli")
    assert (tmp_path / "state.db").exists()
    assert not (tmp_path / "elsewhere.db").exists() and not (tmp_path / "home").exists()
    assert os.listdir(tmp_path) == ["state.db"]
