"""Many Hermes profiles in one PostgreSQL database: each in a schema of its own.

A profile (``?profile=NAME`` in the URL, ``profile=`` of the stores and engines,
``hermes-store --profile``, or the Hermes profile folder the drop-in runs under) keeps its
tables, Alembic's version table included, in schema ``hermes_<name>``. The database's
``public`` schema may hold another store (the one without a profile): a profile never
reads nor writes its rows. Which schema holds which rows is checked with plain,
schema-qualified queries.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from support import migrate_to

import hermes_store
from hermes_store import SessionDB
from hermes_store.aio import AsyncSessionDB
from hermes_store.cli.app import cli
from hermes_store.db.engine import create_engine
from hermes_store.db.profiles import profile_schema
from hermes_store.errors import DatabaseNotFound, InsufficientPrivilege
from hermes_store.schema.revisions import history

pytestmark = pytest.mark.postgres

STORE_TABLES = {"sessions", "messages", "state_meta", "alembic_version"}


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.exec_driver_sql(sql)]
    finally:
        engine.dispose()


def _tables(url: str, schema: str) -> set[str]:
    rows = _rows(url, f"SELECT tablename FROM pg_tables WHERE schemaname = '{schema}'")
    return {str(name) for (name,) in rows}


def _with_profile(url: str, name: str) -> str:
    return sa.make_url(url).update_query_dict({"profile": name}).render_as_string(hide_password=False)


def _session_ids(url: str, schema: str) -> list[str]:
    return [str(sid) for (sid,) in _rows(url, f"SELECT id FROM {schema}.sessions ORDER BY id")]


def test_profile_names_map_to_schemas() -> None:
    assert profile_schema("work") == "hermes_work"
    assert profile_schema("my-work_2") == "hermes_my_work_2"
    for bad in ("Work", "a b", "", "../x", "x" * 57, 'x"; DROP'):
        with pytest.raises(ValueError, match="profile"):
            profile_schema(bad)


def test_a_profile_on_sqlite_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="PostgreSQL"):
        create_engine(tmp_path / "state.db", profile="work")


def test_a_new_profile_beside_a_store_in_public_sees_none_of_it(pg_head_url: str) -> None:
    default = SessionDB(url=pg_head_url)
    default.create_session("public-one", "cli")
    default.append_message("public-one", "user", "docker lives in public")
    work = SessionDB(url=pg_head_url, profile="work")
    try:
        assert work.get_session("public-one") is None
        assert work.search_messages("docker") == []
        assert work.list_sessions_rich() == []
        assert work.session_count() == 0
        work.create_session("work-one", "cli")
        work.append_message("work-one", "user", "docker lives in work")
        assert [hit["session_id"] for hit in work.search_messages("docker")] == ["work-one"]
        assert [hit["session_id"] for hit in default.search_messages("docker")] == ["public-one"]
        assert default.get_session("work-one") is None
    finally:
        work.close()
        default.close()
    assert _session_ids(pg_head_url, "public") == ["public-one"]
    assert _session_ids(pg_head_url, "hermes_work") == ["work-one"]
    assert _rows(pg_head_url, "SELECT count(*) FROM public.messages") == [(1,)]
    assert _rows(pg_head_url, "SELECT count(*) FROM hermes_work.messages") == [(1,)]
    assert _tables(pg_head_url, "hermes_work") >= STORE_TABLES
    assert _rows(pg_head_url, "SELECT version_num FROM hermes_work.alembic_version") == [(history().head,)]


def test_two_profiles_in_an_empty_database_keep_to_their_schemas(pg_url: str) -> None:
    home = SessionDB(url=_with_profile(pg_url, "home"))
    work = SessionDB(url=pg_url, profile="work")
    try:
        home.create_session("h", "cli")
        home.append_message("h", "user", "the lighthouse 灯塔 at home")
        work.create_session("w", "cli")
        work.append_message("w", "user", "the lighthouse 灯塔 at work")
        for db, mine, other in ((home, "h", "w"), (work, "w", "h")):
            assert [s["id"] for s in db.list_sessions_rich()] == [mine]
            assert db.get_session(other) is None
            assert db.get_messages(other) == []
            assert [hit["session_id"] for hit in db.search_messages("lighthouse")] == [mine]
            assert [hit["session_id"] for hit in db.search_messages("灯塔")] == [mine]
    finally:
        home.close()
        work.close()
    assert _tables(pg_url, "public") == set()  # no profile-less store was made
    for schema, sid in (("hermes_home", "h"), ("hermes_work", "w")):
        assert _tables(pg_url, schema) >= STORE_TABLES
        assert _session_ids(pg_url, schema) == [sid]
        assert _rows(pg_url, f"SELECT version_num FROM {schema}.alembic_version") == [(history().head,)]


@pytest.mark.parametrize("driver", ["psycopg_async", "asyncpg"])
def test_async_profiles_keep_to_their_schemas(pg_head_url: str, driver: str) -> None:
    if driver == "asyncpg":
        pytest.importorskip("asyncpg")
    on_driver = sa.make_url(pg_head_url).set(drivername=f"postgresql+{driver}")
    url = on_driver.render_as_string(hide_password=False)

    async def scenario() -> tuple[list[Any], list[Any], Any]:
        work = AsyncSessionDB(url=url, profile="work")
        home = AsyncSessionDB(url=_with_profile(url, "home"))
        try:
            await work.create_session("w", "cli")
            await work.append_message("w", "user", "async lighthouse")
            await home.create_session("h", "cli")
            await home.append_message("h", "user", "async lighthouse")
            work_hits = await work.search_messages("lighthouse")
            home_hits = await home.search_messages("lighthouse")
            return work_hits, home_hits, await home.get_session("w")
        finally:
            await work.close()
            await home.close()

    work_hits, home_hits, crossed = asyncio.run(scenario())
    assert [hit["session_id"] for hit in work_hits] == ["w"]
    assert [hit["session_id"] for hit in home_hits] == ["h"]
    assert crossed is None
    assert _session_ids(pg_head_url, "hermes_work") == ["w"]
    assert _session_ids(pg_head_url, "hermes_home") == ["h"]
    assert _rows(pg_head_url, "SELECT count(*) FROM public.sessions") == [(0,)]


def test_cli_upgrade_and_reads_take_the_profile(pg_url: str) -> None:
    runner = CliRunner()
    upgraded = runner.invoke(cli, ["--url", pg_url, "--profile", "work", "upgrade"])
    assert upgraded.exit_code == 0, upgraded.output
    assert _tables(pg_url, "hermes_work") >= STORE_TABLES
    assert _tables(pg_url, "public") == set()
    with SessionDB(url=pg_url, profile="work") as work:
        work.create_session("w", "cli")
    listed = runner.invoke(cli, ["--url", pg_url, "--profile", "work", "sessions", "--json"])
    assert listed.exit_code == 0, listed.output
    assert [row["id"] for row in json.loads(listed.output)] == ["w"]
    other = runner.invoke(cli, ["--url", pg_url, "--profile", "home", "upgrade"])
    assert other.exit_code == 0, other.output
    empty = runner.invoke(cli, ["--url", pg_url, "--profile", "home", "sessions", "--json"])
    assert empty.exit_code == 0, empty.output
    assert json.loads(empty.output) == []


def test_copy_from_a_file_into_a_profile_and_back(pg_head_url: str, tmp_path: Path) -> None:
    with SessionDB(url=pg_head_url) as default:
        default.create_session("public-only", "cli")
        default.append_message("public-only", "user", "stays in public")
    with SessionDB(tmp_path / "source.db") as source:
        source.create_session("root", "cli", model="m")
        source.create_session("child", "cli", parent_session_id="root")
        for i in range(12):
            source.append_message("root" if i % 2 else "child", "user", f"message {i} 中文")
        exported = json.dumps(source.export_all(), sort_keys=True, default=str)
    work_url = _with_profile(pg_head_url, "work")
    runner = CliRunner()
    into = runner.invoke(cli, ["copy", str(tmp_path / "source.db"), work_url])
    assert into.exit_code == 0, into.output
    assert _session_ids(pg_head_url, "hermes_work") == ["child", "root"]
    assert _session_ids(pg_head_url, "public") == ["public-only"]
    back = runner.invoke(cli, ["copy", work_url, str(tmp_path / "back.db")])
    assert back.exit_code == 0, back.output
    with SessionDB(tmp_path / "back.db") as copied:
        assert json.dumps(copied.export_all(), sort_keys=True, default=str) == exported


def test_hermes_drop_in_under_a_profile_folder_uses_its_schema(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hermes_state

    monkeypatch.setenv("HERMES_HOME", str(tmp_path / ".hermes" / "profiles" / "work"))
    db = hermes_state.SessionDB(url=pg_url)
    db.create_session("w", "cli")
    db.close()
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / ".hermes"))
    db = hermes_state.SessionDB(url=pg_url)
    db.create_session("d", "cli")
    assert db.get_session("w") is None
    db.close()
    assert _session_ids(pg_url, "hermes_work") == ["w"]
    assert _session_ids(pg_url, "public") == ["d"]


def test_upgrade_of_a_profile_leaves_public_alone(pg_head_url: str) -> None:
    before = _tables(pg_head_url, "public")
    hermes_store.upgrade(create_engine(pg_head_url, profile="work"))
    assert _tables(pg_head_url, "public") == before
    assert _tables(pg_head_url, "hermes_work") >= STORE_TABLES


def test_reading_a_profile_that_has_no_schema_yet_never_reads_public(pg_head_url: str) -> None:
    with SessionDB(url=pg_head_url) as default:
        default.create_session("public-one", "cli")
        default.append_message("public-one", "user", "docker lives in public")
    runner = CliRunner()
    listed = runner.invoke(cli, ["--url", pg_head_url, "--profile", "ghost", "sessions", "--json"])
    assert "public-one" not in listed.output
    searched = runner.invoke(cli, ["--url", pg_head_url, "--profile", "ghost", "search", "docker"])
    assert "public-one" not in searched.output
    with pytest.raises(DatabaseNotFound, match=r"schema hermes_ghost .* holds no store yet"):
        SessionDB(url=pg_head_url, profile="ghost", read_only=True)
    assert _rows(pg_head_url, "SELECT count(*) FROM pg_namespace WHERE nspname = 'hermes_ghost'") == [(0,)]


def test_standbys_are_read_in_the_primarys_profile(pg_head_url: str) -> None:
    down = "postgresql+psycopg://postgres@127.0.0.1:1/postgres"  # never reached: only named
    with SessionDB(url=_with_profile(pg_head_url, "work"), read_urls=[down]) as db:
        standbys = [name for name in db.standby_reads_served if name != "primary"]
    assert standbys == [down + "?profile=work"]
    with pytest.raises(ValueError, match="differs"):
        SessionDB(url=_with_profile(pg_head_url, "work"), read_urls=[down + "?profile=home"])


@pytest.fixture
def role_without_create(pg_url: str) -> Iterator[tuple[str, str]]:
    """A new login role that may create nothing in the database (nor in public), and an
    admin URL; the database already has the extensions the store needs."""
    role = f"hermes_profile_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE ROLE "{role}" LOGIN')
        connection.exec_driver_sql(f'REVOKE CREATE ON SCHEMA public FROM PUBLIC, "{role}"')
        connection.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
        connection.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS btree_gin SCHEMA public")
    try:
        as_role = sa.make_url(pg_url).set(username=role, password=None)
        yield as_role.render_as_string(hide_password=False), role
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'"
            )
            connection.exec_driver_sql(f'DROP OWNED BY "{role}"')
            connection.exec_driver_sql(f'DROP ROLE "{role}"')
        admin.dispose()


def test_a_profile_schema_made_by_the_administrator_is_used(
    pg_url: str, role_without_create: tuple[str, str]
) -> None:
    url, role = role_without_create
    with pytest.raises(InsufficientPrivilege):
        SessionDB(url=url, profile="team")  # it may not create the schema itself
    admin = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    with admin.begin() as connection:
        connection.exec_driver_sql(f'CREATE SCHEMA hermes_team AUTHORIZATION "{role}"')
    admin.dispose()
    with SessionDB(url=url, profile="team") as db:
        db.create_session("t", "cli")
    assert _session_ids(pg_url, "hermes_team") == ["t"]


def _schema_objects(url: str, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """Columns, indexes, constraints and triggers of ``schema``, its name taken out."""

    def rows(sql: str) -> list[tuple[Any, ...]]:
        found = _rows(url, sql.replace("{schema}", schema))
        return [tuple(str(v).replace(f"{schema}.", "") for v in row) for row in found]

    return {
        "columns": rows(
            "SELECT table_name, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = '{schema}' ORDER BY 1, 2"
        ),
        "indexes": rows(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = '{schema}' ORDER BY 1"
        ),
        "constraints": rows(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE connamespace = '{schema}'::regnamespace ORDER BY 1"
        ),
        "triggers": rows(
            "SELECT tgname, pg_get_triggerdef(g.oid) FROM pg_trigger g JOIN pg_class t ON t.oid = g.tgrelid "
            "WHERE t.relnamespace = '{schema}'::regnamespace AND NOT tgisinternal ORDER BY 1"
        ),
        "versions": rows("SELECT version_num FROM {schema}.alembic_version"),
    }


def test_an_old_profile_upgrades_step_by_step_beside_a_store_at_head(pg_head_url: str) -> None:
    # public holds a store at head: every check the revisions make (is this column, index,
    # table there yet?) must look at the profile's own schema, or steps would be skipped.
    migrate_to(_with_profile(pg_head_url, "old"), "0005")
    assert _rows(pg_head_url, "SELECT version_num FROM hermes_old.alembic_version") == [("0005",)]
    runner = CliRunner()
    upgraded = runner.invoke(cli, ["--url", pg_head_url, "--profile", "old", "upgrade"])
    assert upgraded.exit_code == 0, upgraded.output
    SessionDB(url=pg_head_url, profile="fresh").close()
    assert _schema_objects(pg_head_url, "hermes_old") == _schema_objects(pg_head_url, "hermes_fresh")


_SCHEMA_SIZE = (
    "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
    "WHERE c.relnamespace = '{schema}'::regnamespace AND c.relkind IN ('r', 'm')"
)


def test_info_gives_the_size_of_the_profiles_own_schema(pg_head_url: str) -> None:
    with SessionDB(url=pg_head_url, profile="work") as work:
        work.create_session("w", "cli")
    shown = CliRunner().invoke(cli, ["--url", pg_head_url, "--profile", "work", "info", "--json"])
    assert shown.exit_code == 0, shown.output
    expected = _rows(pg_head_url, _SCHEMA_SIZE.format(schema="hermes_work"))[0][0]
    assert json.loads(shown.output)["size_bytes"] == expected


def test_a_profiles_downgrade_never_drops_what_public_holds(pg_head_url: str) -> None:
    # The profile lacks an index and a table its downgrade drops "if it exists": the
    # names must not be found in public's store instead.
    SessionDB(url=pg_head_url, profile="work").close()
    admin = sa.create_engine(pg_head_url, poolclass=sa.pool.NullPool)
    with admin.begin() as connection:
        connection.exec_driver_sql("DROP INDEX hermes_work.idx_sessions_session_key")
        connection.exec_driver_sql("DROP TABLE hermes_work.compression_locks")
    admin.dispose()
    public_before = _tables(pg_head_url, "public")
    indexes = "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1"
    public_indexes = _rows(pg_head_url, indexes)
    functions = "SELECT proname FROM pg_proc WHERE pronamespace = 'public'::regnamespace ORDER BY 1"
    public_functions = _rows(pg_head_url, functions)
    # Down through the revisions that drop PostgreSQL functions and indexes too.
    hermes_store.downgrade(create_engine(pg_head_url, profile="work"), "0011")
    assert _rows(pg_head_url, "SELECT version_num FROM hermes_work.alembic_version") == [("0011",)]
    assert _tables(pg_head_url, "public") == public_before
    assert _rows(pg_head_url, indexes) == public_indexes
    assert _rows(pg_head_url, functions) == public_functions
