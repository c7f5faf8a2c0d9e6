"""squawk, the PostgreSQL migration linter, passes the ``--sql`` script of every revision.

Each revision's script is what a DBA would run for that step alone (``alembic upgrade
PREV:REV --sql`` on a ``postgresql`` URL; no server is needed). A rule squawk raises is
either fixed in the revision or let pass there with ``-- squawk-ignore-file RULE -- why``
(``hermes_store.schema.migration_ops.squawk_ignore``), so a new revision that takes a
blocking lock, builds an index without ``CONCURRENTLY`` or forgets the lock timeout fails
here.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_store.schema.migrate import alembic_config
from hermes_store.schema.revisions import history

OFFLINE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/offline_only"
PG_VERSION = "14"
"""The oldest server these scripts target (``client_connection_check_interval`` is 14's)."""


def squawk_path() -> str | None:
    beside_python = Path(sys.executable).with_name("squawk")
    return str(beside_python) if beside_python.exists() else shutil.which("squawk")


def offline_sql(span: str) -> str:
    """``alembic -x url=postgresql… upgrade SPAN --sql``, through Alembic's command API in
    this process (thirteen interpreter starts would cost more than the whole check)."""
    from alembic import command

    config = alembic_config()
    config.cmd_opts = argparse.Namespace(x=[f"url={OFFLINE_URL}"])
    config.output_buffer = io.StringIO()
    command.upgrade(config, span, sql=True)
    return config.output_buffer.getvalue()


def revision_scripts() -> dict[str, str]:
    revisions = history().revisions
    return {
        rev: offline_sql(f"{'base' if i == 0 else revisions[i - 1]}:{rev}") for i, rev in enumerate(revisions)
    }


def test_squawk_passes_the_offline_sql_of_every_postgresql_revision(tmp_path: Path) -> None:
    squawk = squawk_path()
    if squawk is None:
        pytest.skip("squawk is not installed (pip install squawk-cli; it is in the test extra)")
    scripts = revision_scripts()
    assert len(scripts) == len(history().revisions)
    for revision, script in scripts.items():
        assert "alembic_version" in script and "SET lock_timeout" in script, revision
        (tmp_path / f"{revision}.sql").write_text(script)
    result = subprocess.run(
        [
            squawk,
            "--reporter",
            "gcc",
            f"--pg-version={PG_VERSION}",
            *sorted(map(str, tmp_path.glob("*.sql"))),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=120,
    )
    assert (result.returncode, result.stdout.strip()) == (0, ""), result.stdout + result.stderr


def test_squawk_still_flags_a_blocking_index_build(tmp_path: Path) -> None:
    """The check can fail: the statement 0011 no longer emits is still caught."""
    squawk = squawk_path()
    if squawk is None:
        pytest.skip("squawk is not installed (pip install squawk-cli; it is in the test extra)")
    script = tmp_path / "blocking.sql"
    script.write_text(
        "SET lock_timeout = '500ms';\nSET statement_timeout = '60s';\n"
        "CREATE INDEX IF NOT EXISTS idx_x ON messages (session_id);\n"
    )
    result = subprocess.run(
        [squawk, "--reporter", "gcc", str(script)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=60,
    )
    assert result.returncode != 0 and "require-concurrent-index-creation" in result.stdout
