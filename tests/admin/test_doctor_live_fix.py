"""``doctor --fix`` on a live store: counters are recomputed from the rows as they are
when the repair commits, not as they were when the check ran.

Another process appends a message after the check and before the fix (run to the end in
between, so the order is certain, not timed); the repaired counter must include it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from hermes_store.admin.doctor import Doctor
from hermes_store.api.session_db import SessionDB
from hermes_store.db.engine import create_engine

APPEND = """
import sys
from hermes_store.api.session_db import SessionDB
with SessionDB(sys.argv[1]) as store:
    store.append_message("live", "assistant", "late", tool_calls=[{"id": "a"}, {"id": "b"}])
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "state.db")


def _counters(store_url: str) -> tuple[int, int]:
    with SessionDB(store_url) as store:
        row = store.get_session("live")
    assert row is not None
    return int(row["message_count"]), int(row["tool_call_count"])


def test_an_append_between_check_and_fix_is_counted(store_url: str) -> None:
    with SessionDB(store_url) as store:
        store.create_session("live", "cli")
        store.append_message("live", "user", "one")
        store.append_message("live", "user", "two", tool_calls=[{"id": "x"}])
        # Damage the counters so that the check finds them wrong.
        store.unit_of_work.write_connection(
            lambda db: db.execute(sa.text("UPDATE sessions SET message_count = 0, tool_call_count = 0")),
            "breaking counters",
        )
    engine = create_engine(store_url)
    try:
        doctor = Doctor(engine)
        findings = {finding.check: finding.status for finding in doctor.check()}
        assert findings["counters"] == "fail"
        subprocess.run([sys.executable, "-c", APPEND, store_url], check=True, timeout=60)
        done = doctor.fix()
    finally:
        engine.dispose()
    assert "recomputed counters of 1 session(s)" in done
    assert _counters(store_url) == (3, 3)
