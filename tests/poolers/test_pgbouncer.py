"""The store through PgBouncer in transaction mode, with PgBouncer's stock settings.

A managed PostgreSQL puts such a pooler in front of the server: it refuses startup
``options``, keeps no session state between transactions (settings, advisory locks,
prepared statements land on whichever server connection the next transaction gets) and
here pools two server connections for every client. The store must open an empty
database, write from several processes, race a first open, keep its statement bounds and
serve asyncio tasks through it.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from pgbouncer import transaction_pooler

from hermes_store import SessionDB
from hermes_store.errors import StoreTimeout

pytestmark = pytest.mark.postgres


@pytest.fixture
def pooled_url(pg_url: str, tmp_path: Path) -> Iterator[str]:
    with transaction_pooler(pg_url, tmp_path) as url:
        yield url


def _left_on_the_server(direct_url: str) -> dict[str, Any]:
    """What clients left behind in the pooler's server sessions: advisory locks still held,
    and settings still changed for the session (seen from a direct connection)."""
    engine = sa.create_engine(direct_url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            locks = connection.exec_driver_sql(
                "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND pid <> pg_backend_pid() "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            ).scalar()
            idle_in_transaction = connection.exec_driver_sql(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND state LIKE 'idle in transaction%%' AND pid <> pg_backend_pid()"
            ).scalar()
    finally:
        engine.dispose()
    return {"advisory_locks": locks, "idle_in_transaction": idle_in_transaction}


def test_a_first_open_leaves_no_lock_or_transaction_on_the_pooled_server(
    pg_url: str, pooled_url: str
) -> None:
    SessionDB(url=pooled_url).close()
    SessionDB(url=pooled_url).close()
    assert _left_on_the_server(pg_url) == {"advisory_locks": 0, "idle_in_transaction": 0}


def test_first_open_writes_and_reads_through_the_pooler(pooled_url: str) -> None:
    db = SessionDB(url=pooled_url)
    try:
        db.create_session("s1", "cli", system_prompt="p")
        for n in range(12):  # past the driver's threshold for preparing a statement
            db.append_message("s1", role="user", content=f"docker question {n}")
            assert db.get_session("s1") is not None
        assert db.message_count("s1") == 12
        assert [hit["session_id"] for hit in db.search_messages("docker")][:1] == ["s1"]
    finally:
        db.close()


def test_the_statement_bound_holds_through_the_pooler(pooled_url: str) -> None:
    SessionDB(url=pooled_url).close()
    db = SessionDB(url=pooled_url, statement_timeout="300ms")
    try:
        with pytest.raises(StoreTimeout, match="statement_timeout"):
            db.unit_of_work.write_connection(
                lambda connection: connection.exec_driver_sql("SELECT pg_sleep(2)"), "sleeping"
            )
        db.append_message(db.create_session("s2", "cli"), role="user", content="still fine")
    finally:
        db.close()


_WRITER = """
import sys
from hermes_store import SessionDB
url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
db = SessionDB(url=url)
db.create_session(name, "cli")
for n in range(count):
    db.append_message(name, role="user", content=f"message {n} from {name}")
    db.search_messages("message")
    db.list_sessions_rich(limit=5)
db.close()
"""


def _run_writers(url: str, names: list[str], count: int) -> list[subprocess.CompletedProcess[str]]:
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(_WRITER), url, name, str(count)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    done = []
    for process in processes:
        out, err = process.communicate(timeout=240)
        done.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return done


def test_racing_first_opens_and_writers_share_two_server_connections(pooled_url: str) -> None:
    names = [f"w{n}" for n in range(8)]
    results = _run_writers(pooled_url, names, 15)  # every writer's open races on an empty database
    assert [r.stderr.strip().splitlines()[-1:] for r in results if r.returncode] == []
    db = SessionDB(url=pooled_url)
    try:
        assert {name: db.message_count(name) for name in names} == dict.fromkeys(names, 15)
    finally:
        db.close()


def _cli(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hermes_store.cli", *arguments], capture_output=True, text=True, timeout=120
    )


def test_the_upgrade_command_through_the_pooler(pooled_url: str) -> None:
    done = _cli("--url", pooled_url, "upgrade")
    assert done.returncode == 0, done.stderr
    again = _cli("--url", pooled_url, "upgrade")
    assert again.returncode == 0, again.stderr


def test_fifty_asyncio_tasks_through_the_pooler(pooled_url: str) -> None:
    from hermes_store.aio import AsyncSessionDB

    async def main() -> dict[str, int]:
        async with AsyncSessionDB(
            url=pooled_url.replace("postgresql+psycopg", "postgresql+psycopg_async")
        ) as db:

            async def one(n: int) -> None:
                sid = await db.create_session(f"a{n}", "api")
                for k in range(3):
                    await db.append_message(sid, role="user", content=f"task {n} says {k}")
                await db.search_messages("says")

            await asyncio.gather(*(one(n) for n in range(50)))
            return {f"a{n}": await db.message_count(f"a{n}") for n in range(50)}

    counts = asyncio.run(main())
    assert counts == {f"a{n}": 3 for n in range(50)}


def test_a_copy_into_the_pooler_is_refused_in_one_line(pooled_url: str, tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    db = SessionDB(source)
    db.append_message(db.create_session("s", "cli"), role="user", content="hi")
    db.close()
    done = _cli("copy", str(source), pooled_url)
    assert done.returncode != 0
    assert "direct connection" in done.stderr and "\n" not in done.stderr.strip()


def test_an_upgrade_that_needs_a_session_is_refused_in_one_line(pg_url: str, pooled_url: str) -> None:
    from hermes_store.schema.migrate import upgrade

    upgrade(pg_url, "0019")  # behind head, built directly
    done = _cli("--url", pooled_url, "upgrade")
    assert done.returncode != 0
    assert "direct connection" in done.stderr and "\n" not in done.stderr.strip()
    assert _left_on_the_server(pg_url) == {"advisory_locks": 0, "idle_in_transaction": 0}


def test_options_the_pooler_drops_silently_are_applied_per_transaction(pg_url: str, tmp_path: Path) -> None:
    with transaction_pooler(pg_url, tmp_path, ignore_options=True) as url:
        SessionDB(url=url).close()
        db = SessionDB(url=url, statement_timeout="300ms")
        try:
            with pytest.raises(StoreTimeout, match="statement_timeout"):
                db.unit_of_work.write_connection(
                    lambda connection: connection.exec_driver_sql("SELECT pg_sleep(2)"), "sleeping"
                )
            sid = db.create_session("s", "cli")
            for n in range(12):  # past the driver's threshold for preparing a statement
                db.append_message(sid, role="user", content=f"line {n}")
                db.get_session(sid)
        finally:
            db.close()


def _statements_of_a_write_and_a_timeout(url: str) -> list[str]:
    from sqlalchemy import event

    db = SessionDB(url=url, statement_timeout="300ms")
    seen: list[str] = []
    event.listen(db.engine, "before_cursor_execute", lambda *args: seen.append(args[2]))
    try:
        db.append_message(db.create_session("s", "cli"), role="user", content="hi")
        with pytest.raises(StoreTimeout):
            db.unit_of_work.write_connection(lambda c: c.exec_driver_sql("SELECT pg_sleep(2)"), "sleeping")
    finally:
        db.close()
    return seen


@pytest.mark.parametrize(
    ("query", "pooled"), [("?pooler=transaction", True), ("?pooler=none", False), ("", False)]
)
def test_a_declared_pooler_gets_per_transaction_settings_and_a_direct_one_none(
    pg_url: str, query: str, pooled: bool
) -> None:
    seen = _statements_of_a_write_and_a_timeout(pg_url + query)
    per_transaction = [s for s in seen if s.startswith("SET LOCAL statement_timeout")]
    assert bool(per_transaction) is pooled


def test_an_unknown_pooler_value_is_refused() -> None:
    with pytest.raises(ValueError, match="pooler must be"):
        SessionDB(url="postgresql+psycopg://nobody@127.0.0.1:1/none?pooler=session")


def _profile_url(url: str, name: str) -> str:
    return sa.make_url(url).update_query_dict({"profile": name}).render_as_string(hide_password=False)


def test_profiles_keep_to_their_schemas_through_the_pooler(pg_url: str, pooled_url: str) -> None:
    with SessionDB(url=pg_url) as default:  # a store without a profile, in public
        default.create_session("public-one", "cli")
    for profile, names in (("work", ["w1", "w2"]), ("home", ["h1", "h2"])):
        # The search path is applied per transaction here; each profile's first open races.
        results = _run_writers(_profile_url(pooled_url, profile), names, 8)
        assert [r.stderr.strip().splitlines()[-1:] for r in results if r.returncode] == []
    engine = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:

            def ids(schema: str) -> list[str]:
                rows = connection.exec_driver_sql(f"SELECT id FROM {schema}.sessions ORDER BY id")
                return [str(sid) for sid in rows.scalars()]

            def messages(schema: str) -> int:
                return int(connection.exec_driver_sql(f"SELECT count(*) FROM {schema}.messages").scalar_one())

            assert (ids("public"), messages("public")) == (["public-one"], 0)
            assert (ids("hermes_work"), messages("hermes_work")) == (["w1", "w2"], 16)
            assert (ids("hermes_home"), messages("hermes_home")) == (["h1", "h2"], 16)
    finally:
        engine.dispose()
    assert _left_on_the_server(pg_url) == {"advisory_locks": 0, "idle_in_transaction": 0}
