"""A PostgreSQL upgrade SIGKILLed at three different points completes when run again.

The real ``alembic upgrade head`` runs in a subprocess and is killed while:

1. revision 0012's ``ALTER TABLE messages ADD COLUMN`` waits for its lock (a reader of
   the running release holds a transaction open on ``messages``): nothing of 0012 done;
2. 0012's backfill waits inside its last batch for another session (a test-only trigger
   on the batch's last row waits for a lock the test holds), after its first batch
   committed: the rerun resumes at the first row still missing;
3. 0011's ``CREATE INDEX CONCURRENTLY`` waits for a writer's open transaction: the killed
   build leaves an INVALID index, which the rerun finds and rebuilds.

Each point is reached deterministically (the test waits until ``pg_stat_activity`` /
``pg_stat_progress_create_index`` / ``pg_locks`` show the step running or waiting).
After the kill the migrator's server session must end promptly
(``client_connection_check_interval``), the rerun must succeed, every row must have its
search vector, and the schema — columns, indexes with their validity, constraints,
triggers, functions, versions — must equal a clean upgrade's.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pg_server
import pytest
import sqlalchemy as sa
from pg_catalog import (
    MIGRATOR,
    alembic,
    alembic_command,
    catalog,
    engine_for,
    hold_update_of,
    scalar,
    update_is_held,
    wait_for,
)
from support import REPO_ROOT, migrate_to

from hermes_store.schema.migration_ops import batch_rows

pytestmark = pytest.mark.postgres

BATCH_ROWS = batch_rows()
"""Rows per backfill batch in this run (tests/conftest.py sets 100)."""

ROWS = 2 * BATCH_ROWS
"""Messages of the backfill test's database: two backfill batches
(:data:`BATCH_ROWS`), the first committed, the second held."""
FEW_ROWS = 300
"""Messages of the other two tests' databases (killed before 0012's backfill starts): a
rerun then upgrades a few hundred rows, not six thousand, through every revision."""


def _fill(rows: int) -> tuple[str, ...]:
    return (
        "INSERT INTO sessions (id, source, started_at, message_count, tool_call_count, input_tokens, "
        "output_tokens) VALUES ('s', 'cli', 1.7e9, 0, 0, 0, 0)",
        "INSERT INTO messages (session_id, role, content, tool_name, timestamp) "
        "SELECT 's', 'user', 'message ' || i || ' about kubernetes 记忆', "
        f"CASE WHEN mod(i, 3) = 0 THEN 'terminal' END, 1.7e9 + i FROM generate_series(1, {rows}) AS i",
    )


TEMPLATES = {
    # name: (messages, revision)
    "0010": (FEW_ROWS, "0010"),
    "0011": (FEW_ROWS, "0011"),
    "0011_backfill": (ROWS, "0011"),
    # The reference: upgraded to head without interruption. Only its schema is compared.
    "clean": (FEW_ROWS, "head"),
}


def _builder(rows: int, revision: str) -> Callable[[str], None]:
    def build(url: str) -> None:
        migrate_to(url, "0010")
        engine = engine_for(url)
        with engine.begin() as connection:
            for statement in _fill(rows):
                connection.exec_driver_sql(statement)
        engine.dispose()
        migrate_to(url, revision)

    return build


@pytest.fixture(scope="module")
def templates(shared_pg_database: pg_server.SharedDatabase) -> dict[str, str]:
    """Template databases (:data:`TEMPLATES`), built once per test run: at 0010 and 0011
    holding :data:`FEW_ROWS` messages, at 0011 holding :data:`ROWS`, and a reference
    database upgraded to head without interruption."""
    return {
        key: shared_pg_database(f"killed_{key}", _builder(rows, revision))
        for key, (rows, revision) in TEMPLATES.items()
    }


@pytest.fixture
def copy_of(pg_admin_url: str, templates: dict[str, str]) -> Iterator[Callable[[str], str]]:
    """``copy_of("0011")``: a new database copied from that template (dropped afterwards)."""
    with ExitStack() as made:

        def make(template_key: str) -> str:
            template = sa.make_url(templates[template_key]).database
            return made.enter_context(pg_server.scratch_database(pg_admin_url, "hermes_t", template=template))

        yield make


def _migrator_query(url: str) -> str:
    return str(
        scalar(
            url,
            "SELECT COALESCE(string_agg(query, ' | '), '') FROM pg_stat_activity "
            f"WHERE application_name = '{MIGRATOR}' AND datname = current_database()",
        )
    )


def _start_upgrade(url: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as stderr:
        return subprocess.Popen(
            alembic_command(url, "upgrade", "head"), cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=stderr
        )


def _kill_and_rerun(
    url: str,
    upgrade: subprocess.Popen[bytes],
    release: Callable[[], None],
    clean: str,
    rows: int = FEW_ROWS,
    after_kill: Callable[[], None] = lambda: None,
) -> float:
    """SIGKILL the upgrade, wait for its server session to end, release the blocker, rerun;
    check the result; return how long the killed migrator's session outlived it (s)."""
    upgrade.kill()
    upgrade.wait(timeout=30)
    killed = time.monotonic()
    wait_for(lambda: _migrator_query(url) == "", "the killed migrator's server session to end", 30.0)
    outlived = time.monotonic() - killed
    after_kill()
    release()
    alembic(url, "upgrade", "head")
    assert scalar(url, "SELECT count(*) FROM messages WHERE search_vector IS NULL") == 0
    assert scalar(url, "SELECT count(*) FROM messages") == rows
    assert catalog(url) == catalog(clean)
    return outlived


def test_killed_while_0012_waits_for_its_column_lock(
    copy_of: Callable[[str], str], templates: dict[str, str], tmp_path: Path, record_property: Callable
) -> None:
    url = copy_of("0011")
    reader = engine_for(url).connect()
    reader.exec_driver_sql("SELECT count(*) FROM messages WHERE id = 1").all()  # ACCESS SHARE, held
    upgrade = _start_upgrade(url, tmp_path / "upgrade.log")
    wait_for(lambda: "ALTER TABLE messages ADD COLUMN" in _migrator_query(url), "0012's ALTER TABLE")
    assert scalar(url, "SELECT count(*) FROM pg_attribute WHERE attname = 'search_vector'") == 0

    def release() -> None:
        reader.rollback()
        reader.close()

    record_property("migrator_outlived_kill_s", _kill_and_rerun(url, upgrade, release, templates["clean"]))


def test_killed_during_the_backfill_resumes_at_the_first_missing_row(
    copy_of: Callable[[str], str], templates: dict[str, str], tmp_path: Path, record_property: Callable
) -> None:
    url = copy_of("0011_backfill")
    release = hold_update_of(url, ROWS)  # the last message: the last batch waits on it
    upgrade = _start_upgrade(url, tmp_path / "upgrade.log")
    wait_for(lambda: update_is_held(url), "the backfill's last batch to wait")
    assert "UPDATE messages SET search_vector" in _migrator_query(url)
    assert scalar(url, "SELECT count(*) FROM messages WHERE search_vector IS NOT NULL") == ROWS - BATCH_ROWS
    outlived = _kill_and_rerun(url, upgrade, release, templates["clean"], rows=ROWS)
    record_property("migrator_outlived_kill_s", outlived)


def test_killed_during_a_concurrent_index_build_rebuilds_the_invalid_index(
    copy_of: Callable[[str], str], templates: dict[str, str], tmp_path: Path, record_property: Callable
) -> None:
    url = copy_of("0010")
    writer = engine_for(url).connect()
    writer.exec_driver_sql(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('s', 'user', 'open', 1.8e9)"
    )  # ROW EXCLUSIVE held by an open transaction: CONCURRENTLY waits for it
    upgrade = _start_upgrade(url, tmp_path / "upgrade.log")
    wait_for(
        lambda: scalar(
            url,
            "SELECT count(*) FROM pg_stat_progress_create_index p JOIN pg_stat_activity a USING (pid) "
            f"WHERE a.application_name = '{MIGRATOR}' AND starts_with(p.phase, 'waiting for writers') "
            "AND p.datname = current_database()",  # other tests' migrators run on the same server
        ),
        "0011's concurrent build waiting for writers",
    )

    def left_invalid() -> None:
        invalid = scalar(
            url,
            "SELECT string_agg(c.relname, ',') FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE NOT i.indisvalid",
        )
        assert invalid == "idx_messages_fts"

    def release() -> None:
        writer.rollback()
        writer.close()

    outlived = _kill_and_rerun(url, upgrade, release, templates["clean"], after_kill=left_invalid)
    record_property("migrator_outlived_kill_s", outlived)
