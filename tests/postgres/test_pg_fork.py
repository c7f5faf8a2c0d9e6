"""A process forked from one using a PostgreSQL store watches its own replies.

The reply watchdog (a thread that shuts down a connection whose reply is overdue behind a
stalled network) lives once per process. A forked child inherits its object but not its
thread: unless the child starts afresh, the watchdog believes its thread is running, never
starts one, and a child's write behind a stalled network waits forever.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hermes_store import SessionDB
from hermes_store.db import reply_watchdog

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork() is POSIX only")


@pytest.fixture
def pg_url(pg_head_url: str) -> str:
    return pg_head_url


@needs_fork
def test_a_forked_child_runs_a_watchdog_of_its_own(pg_url: str, tmp_path: Path) -> None:
    db = SessionDB(url=f"{pg_url}?statement_timeout=30s")
    db.create_session("s", "cli")  # the parent's watchdog thread is running now
    parent_thread = reply_watchdog._WATCHDOG._thread
    assert parent_thread is not None and parent_thread.is_alive()
    report = tmp_path / "child.json"
    pid = os.fork()
    if pid == 0:  # the child: one write on its own connection, then report
        code = 1
        try:
            db.append_message("s", "user", "from the child")
            watchdog = reply_watchdog._WATCHDOG
            thread = watchdog._thread
            report.write_text(
                json.dumps(
                    {
                        "alive": thread is not None and thread.is_alive(),
                        "inherited": thread is parent_thread,
                        "watched": len(watchdog._watched),
                    }
                )
            )
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    child = json.loads(report.read_text())
    assert child == {"alive": True, "inherited": False, "watched": child["watched"]}
    assert child["watched"] >= 1  # the child's own connection, not the parent's
    db.append_message("s", "user", "parent again")
    assert db.message_count("s") == 2
    db.close()
