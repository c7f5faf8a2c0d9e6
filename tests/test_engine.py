"""The engine: connection pragmas, write locking, file safety, locations, error mapping.

Everything runs against real SQLite files; lock situations are provoked with a second,
raw sqlite3 connection whose busy timeout is 0, so nothing here waits on a clock.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from hermes_store.db.engine import connect_for_writes, create_engine, file_mode, resolve_url, write_engine
from hermes_store.db.sqlite_errors import is_lock_error, translate
from hermes_store.domain.paths import default_db_path
from hermes_store.errors import CorruptDatabase, ReadOnlyStore, UnsafePath
from hermes_store.schema.migrate import ensure_schema


@pytest.fixture
def typical_umask() -> Iterator[None]:
    """Run with the common 022 umask, under which files would otherwise be world-readable."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.fixture
def engine(db_path: Path) -> Iterator[sa.Engine]:
    eng = create_engine(db_path)
    try:
        yield eng
    finally:
        eng.dispose()


def raw(path: Path, timeout: float = 0.0) -> sqlite3.Connection:
    """A second connection that gives up at once when the database is locked."""
    return sqlite3.connect(str(path), timeout=timeout, isolation_level=None)


# --- pragmas -----------------------------------------------------------------------------


def test_every_connection_has_wal_foreign_keys_busy_timeout_and_recursive_triggers(
    engine: sa.Engine,
) -> None:
    with engine.connect() as conn:
        pragmas = {
            name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "foreign_keys", "busy_timeout", "recursive_triggers")
        }
    assert pragmas == {
        "journal_mode": "wal",
        "foreign_keys": 1,
        "busy_timeout": 1000,
        "recursive_triggers": 1,
    }


def test_foreign_keys_are_enforced_on_engine_connections(engine: sa.Engine) -> None:
    ensure_schema(engine)
    with pytest.raises(sa.exc.IntegrityError, match="FOREIGN KEY"), write_engine(engine).begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('nope', 'user', 'x', 1.0)"
        )


def test_insert_or_replace_keeps_both_fts_indexes_in_step(engine: sa.Engine, db_path: Path) -> None:
    ensure_schema(engine)
    with write_engine(engine).begin() as conn:
        conn.exec_driver_sql("INSERT INTO sessions (id, source, started_at) VALUES ('s', 'cli', 1.5)")
        conn.exec_driver_sql(
            "INSERT INTO messages (id, session_id, role, content, timestamp) "
            "VALUES (1, 's', 'user', 'original walrus', 2.5)"
        )
        conn.exec_driver_sql(
            "INSERT OR REPLACE INTO messages (id, session_id, role, content, timestamp) "
            "VALUES (1, 's', 'user', 'replacement narwhal', 3.5)"
        )
    with closing(raw(db_path)) as check:
        for table in ("messages_fts", "messages_fts_trigram"):
            check.execute(f"INSERT INTO {table}({table}, rank) VALUES('integrity-check', 1)")
            matches = check.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH 'walrus'").fetchall()
            assert matches == []
            matches = check.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH 'narwhal'").fetchall()
            assert matches == [(1,)]


# --- transactions ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "connect",
    [lambda engine: write_engine(engine).connect(), connect_for_writes],
    ids=["write_engine", "connect_for_writes"],
)
def test_write_connections_take_the_write_lock_at_begin(
    engine: sa.Engine, db_path: Path, connect: Callable[[sa.Engine], sa.Connection]
) -> None:
    with connect(engine) as conn:
        transaction = conn.begin()  # no statement yet
        with closing(raw(db_path)) as other:
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
            transaction.rollback()
            other.execute("BEGIN IMMEDIATE")  # free again once the writer is done
            other.execute("ROLLBACK")


def test_read_transaction_on_plain_engine_does_not_block_a_writer(engine: sa.Engine, db_path: Path) -> None:
    with write_engine(engine).begin() as conn:
        conn.exec_driver_sql("CREATE TABLE notes (body TEXT)")
        conn.exec_driver_sql("INSERT INTO notes VALUES ('first')")
    with engine.connect() as reader, reader.begin():
        assert reader.exec_driver_sql("SELECT COUNT(*) FROM notes").scalar() == 1
        with closing(raw(db_path)) as writer:
            writer.execute("BEGIN IMMEDIATE")
            writer.execute("INSERT INTO notes VALUES ('second')")
            writer.execute("COMMIT")
        # The reader keeps its snapshot until its transaction ends.
        assert reader.exec_driver_sql("SELECT COUNT(*) FROM notes").scalar() == 1
    with engine.connect() as reader:
        assert reader.exec_driver_sql("SELECT COUNT(*) FROM notes").scalar() == 2


# --- files -------------------------------------------------------------------------------


@pytest.mark.usefixtures("typical_umask")
def test_database_wal_and_shm_are_created_owner_only(db_path: Path) -> None:
    eng = create_engine(db_path)
    try:
        with write_engine(eng).connect() as conn:
            with conn.begin():
                conn.exec_driver_sql("CREATE TABLE notes (body TEXT)")
                conn.exec_driver_sql("INSERT INTO notes VALUES ('private')")
            sidecars = [Path(f"{db_path}-wal"), Path(f"{db_path}-shm")]
            assert all(p.exists() for p in sidecars)
            modes = {p.name: file_mode(p) for p in [db_path, *sidecars]}
    finally:
        eng.dispose()
    assert modes == {"state.db": 0o600, "state.db-wal": 0o600, "state.db-shm": 0o600}


@pytest.mark.usefixtures("typical_umask")
def test_directory_the_engine_creates_is_owner_only(tmp_path: Path) -> None:
    home = tmp_path / "hermes-home"
    create_engine(home / "state.db").dispose()
    assert file_mode(home) == 0o700
    assert file_mode(home / "state.db") == 0o600


@pytest.mark.usefixtures("typical_umask")
def test_every_directory_the_engine_creates_is_owner_only(tmp_path: Path) -> None:
    # A profile home such as ~/.hermes/profiles/<name> may need several new levels.
    profile = tmp_path / "root" / "profiles" / "work"
    create_engine(profile / "state.db").dispose()
    modes = {p.name: file_mode(p) for p in (tmp_path / "root", tmp_path / "root" / "profiles", profile)}
    assert modes == {"root": 0o700, "profiles": 0o700, "work": 0o700}


def test_existing_directory_permissions_are_left_alone(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    create_engine(shared / "state.db").dispose()
    assert file_mode(shared) == 0o755


def test_symlink_at_database_path_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious bytes\n")
    os.chmod(victim, 0o644)
    link = tmp_path / "state.db"
    link.symlink_to(victim)
    with pytest.raises(UnsafePath, match="symbolic link"):
        create_engine(link)
    assert victim.read_bytes() == b"precious bytes\n"
    assert file_mode(victim) == 0o644
    assert not Path(f"{victim}-wal").exists()


def test_dangling_symlink_at_database_path_is_refused_without_creating_its_target(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.db"
    link = tmp_path / "state.db"
    link.symlink_to(target)
    with pytest.raises(UnsafePath):
        create_engine(link)
    assert not target.exists()


# --- locations ---------------------------------------------------------------------------


def test_default_db_path_follows_hermes_home_set_after_import(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "profile-a"))
    assert default_db_path() == tmp_path / "profile-a" / "state.db"
    monkeypatch.setenv("HERMES_HOME", f"  {tmp_path / 'profile-b'}  ")
    assert default_db_path() == tmp_path / "profile-b" / "state.db"
    assert resolve_url(None).database == str(tmp_path / "profile-b" / "state.db")


@pytest.mark.parametrize("hermes_home", [None, "", "   "], ids=["unset", "empty", "blank"])
def test_default_db_path_falls_back_to_dot_hermes_in_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, hermes_home: str | None
) -> None:
    if hermes_home is None:
        monkeypatch.delenv("HERMES_HOME", raising=False)
    else:
        monkeypatch.setenv("HERMES_HOME", hermes_home)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert default_db_path() == tmp_path / "user" / ".hermes" / "state.db"


def test_resolve_url_accepts_none_paths_and_urls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    from_none = resolve_url(None)
    assert (from_none.drivername, from_none.database) == ("sqlite", f"{tmp_path}/home/state.db")
    from_str = resolve_url(f"{tmp_path}/a.db")
    assert (from_str.drivername, from_str.database) == ("sqlite", f"{tmp_path}/a.db")
    from_path = resolve_url(tmp_path / "b.db")
    assert (from_path.drivername, from_path.database) == ("sqlite", f"{tmp_path}/b.db")
    assert resolve_url("~/c.db").database == f"{tmp_path}/user/c.db"
    from_url_string = resolve_url("sqlite:////srv/hermes/state.db")
    assert (from_url_string.drivername, from_url_string.database) == ("sqlite", "/srv/hermes/state.db")
    pg = resolve_url("postgresql+psycopg://hermes@db.example:5432/store")
    assert (pg.drivername, pg.host, pg.port, pg.database) == (
        "postgresql+psycopg",
        "db.example",
        5432,
        "store",
    )
    url = make_url("sqlite:///relative.db")
    assert resolve_url(url) is url


def test_engine_for_a_str_path_and_a_path_opens_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "same.db"
    for target in (str(path), path):
        eng = create_engine(target)
        try:
            with write_engine(eng).begin() as conn:
                conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
                conn.exec_driver_sql("INSERT INTO t VALUES (1)")
        finally:
            eng.dispose()
    with closing(sqlite3.connect(str(path))) as conn:
        assert conn.execute("SELECT COUNT(*) FROM t").fetchone() == (2,)


# --- error mapping -----------------------------------------------------------------------


def test_is_lock_error_recognises_a_real_database_is_locked(db_path: Path) -> None:
    with closing(raw(db_path)) as holder, closing(raw(db_path)) as other:
        holder.execute("CREATE TABLE t (x)")
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError) as raw_error:
            other.execute("BEGIN IMMEDIATE")
        assert "locked" in str(raw_error.value)
        assert is_lock_error(raw_error.value)
        wrapped_engine = sa.create_engine(f"sqlite:///{db_path}", connect_args={"timeout": 0})
        try:
            with pytest.raises(sa.exc.OperationalError) as wrapped, wrapped_engine.connect() as conn:
                conn.exec_driver_sql("INSERT INTO t VALUES (1)")
            assert is_lock_error(wrapped.value)
        finally:
            wrapped_engine.dispose()
        holder.execute("ROLLBACK")


def test_is_lock_error_is_false_for_other_errors(db_path: Path) -> None:
    with closing(raw(db_path)) as conn:
        with pytest.raises(sqlite3.OperationalError) as missing:
            conn.execute("SELECT * FROM no_such_table")
        conn.execute("CREATE TABLE t (x PRIMARY KEY)")
        conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(sqlite3.IntegrityError) as duplicate:
            conn.execute("INSERT INTO t VALUES (1)")
    assert not is_lock_error(missing.value)
    assert not is_lock_error(duplicate.value)
    assert not is_lock_error(ValueError("database is locked"))


def garbage_file(path: Path) -> None:
    path.write_bytes(b"this is certainly not a SQLite database file\n" * 200)


def test_translate_maps_not_a_database_to_corrupt_database(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    garbage_file(path)
    with closing(raw(path)) as conn, pytest.raises(sqlite3.DatabaseError) as raw_error:
        conn.execute("SELECT * FROM sqlite_master")
    assert getattr(raw_error.value, "sqlite_errorname", "") == "SQLITE_NOTADB"
    assert isinstance(translate(raw_error.value, "opening"), CorruptDatabase)
    eng = create_engine(path)
    try:
        with pytest.raises(sa.exc.DatabaseError) as wrapped, eng.connect() as conn:
            conn.exec_driver_sql("SELECT * FROM sqlite_master")
    finally:
        eng.dispose()
    mapped = translate(wrapped.value, "opening the store")
    assert isinstance(mapped, CorruptDatabase)
    assert "opening the store" in str(mapped)


def test_translate_maps_a_read_only_database_to_read_only_store(db_path: Path) -> None:
    with closing(raw(db_path)) as conn:
        conn.execute("CREATE TABLE t (x)")
    read_only = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    with closing(read_only), pytest.raises(sqlite3.OperationalError) as raw_error:
        read_only.execute("INSERT INTO t VALUES (1)")
    assert str(getattr(raw_error.value, "sqlite_errorname", "")).startswith("SQLITE_READONLY")
    assert isinstance(translate(raw_error.value, "appending"), ReadOnlyStore)
    eng = create_engine(db_path)
    try:
        with pytest.raises(sa.exc.OperationalError) as wrapped, eng.connect() as conn:
            conn.exec_driver_sql("PRAGMA query_only=1")
            conn.exec_driver_sql("INSERT INTO t VALUES (1)")
    finally:
        eng.dispose()
    assert isinstance(translate(wrapped.value, "appending"), ReadOnlyStore)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores file permissions")
def test_translate_maps_a_chmod_read_only_file_to_read_only_store(db_path: Path) -> None:
    with closing(raw(db_path)) as conn:
        conn.execute("CREATE TABLE t (x)")
    os.chmod(db_path, 0o400)
    with closing(raw(db_path)) as conn, pytest.raises(sqlite3.OperationalError) as raw_error:
        conn.execute("INSERT INTO t VALUES (1)")
    assert isinstance(translate(raw_error.value, "appending"), ReadOnlyStore)


def test_ensure_schema_on_a_file_that_is_not_a_database_raises_corrupt_database(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    garbage_file(path)
    eng = create_engine(path)
    try:
        with pytest.raises(CorruptDatabase):
            ensure_schema(eng)
    finally:
        eng.dispose()
    assert path.read_bytes() == b"this is certainly not a SQLite database file\n" * 200


def test_translate_returns_errors_without_a_meaning_unchanged() -> None:
    error = ValueError("not a database error")
    assert translate(error, "anything") is error
