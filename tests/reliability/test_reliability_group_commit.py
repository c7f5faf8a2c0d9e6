"""A SIGKILL during group commits loses no acknowledged write.

A child process runs several threads appending to one store as fast as they can (or
asyncio tasks on one ``AsyncSessionDB``, whose appends are batched), so their writes are
committed in groups; it prints every message id a call returned. The
child is killed with SIGKILL mid-stream, several times on the same file, and after each
kill a plain ``sqlite3`` reader checks: every printed id is stored with its content,
nothing is stored twice, the counters equal the rows, and the file and both full-text
indexes pass their integrity checks.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

pytestmark = [pytest.mark.serial]  # kills aimed at a busy writer; parallel tests only slow it

WORKER = Path(__file__).resolve().parent / "_group_commit_writer.py"
KILLS = 2
THREADS = 4
TASKS = 16
ACKS_BEFORE_KILL = 60


def _run_and_kill(path: Path, run: int, mode: str) -> list[tuple[int, str, str]]:
    """Start a writer, SIGKILL it once it has acknowledged enough; every line it printed."""
    writers = THREADS if mode == "threads" else TASKS
    child = subprocess.Popen(
        [sys.executable, str(WORKER), str(path), str(writers), f"r{run}", mode],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    acked: list[tuple[int, str, str]] = []
    deadline = time.monotonic() + 60
    while len(acked) < ACKS_BEFORE_KILL and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        acked.append(_parse(line))
    os.kill(child.pid, signal.SIGKILL)
    # What it printed before dying was acknowledged too (a torn last line was not printed whole).
    for line in child.stdout.read().splitlines(keepends=True):
        if line.endswith("\n"):
            acked.append(_parse(line))
    child.wait()
    assert len(acked) >= ACKS_BEFORE_KILL, "the writer acknowledged too little before the deadline"
    return acked


def _parse(line: str) -> tuple[int, str, str]:
    message_id, session, content = line.rstrip("\n").split("\t")
    return int(message_id), session, content


@pytest.mark.parametrize("mode", ["threads", "tasks"])
def test_sigkill_during_group_commits_loses_no_acknowledged_write(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "state.db"
    acknowledged: dict[int, tuple[str, str]] = {}
    for run in range(KILLS):
        for message_id, session, content in _run_and_kill(path, run, mode):
            assert message_id not in acknowledged, "one id acknowledged for two messages"
            acknowledged[message_id] = (session, content)
        with closing(sqlite3.connect(path)) as check:
            stored = {i: (s, c) for i, s, c in check.execute("SELECT id, session_id, content FROM messages")}
            assert {i: stored.get(i) for i in acknowledged} == acknowledged
            contents = [c for s, c in stored.values()]
            assert len(contents) == len(set(contents)), "a message was stored twice"
            counters = check.execute(
                "SELECT s.id, s.message_count, s.tool_call_count, COUNT(m.id), "
                "COALESCE(SUM(m.tool_calls IS NOT NULL), 0) FROM sessions s "
                "LEFT JOIN messages m ON m.session_id = s.id GROUP BY s.id"
            ).fetchall()
            assert all(row[1] == row[3] and row[2] == row[4] for row in counters), counters
            assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            for index in ("messages_fts", "messages_fts_trigram"):
                check.execute(f"INSERT INTO {index}({index}) VALUES ('integrity-check')")
