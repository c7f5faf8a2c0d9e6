"""A PostgreSQL primary and a streaming-replication hot standby, started by the tests.

Both are throwaway clusters in a temporary folder on free local ports, made with the
server's own tools: ``initdb`` (through ``pg_ctl init``), ``pg_basebackup -R`` for the
standby, ``pg_ctl promote`` for a failover. With ``synchronous=True`` the primary waits for
the standby to confirm each commit (``synchronous_standby_names = '*'``), so no commit it
acknowledged is missing on the standby. Without the server binaries the tests that need
them skip with that reason.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest
from pg_server import find_pg_ctl

_ACCOUNT = "postgres"


def _free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_server_account(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["setpriv", f"--reuid={_ACCOUNT}", f"--regid={_ACCOUNT}", "--init-groups", *command]


@dataclass
class Node:
    """One cluster: its folder, port and the binaries' folder."""

    bindir: Path
    folder: Path
    port: int

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def run(self, *arguments: str) -> None:
        done = subprocess.run(
            _as_server_account([str(self.bindir / arguments[0]), *arguments[1:]]),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{arguments[0]} failed: {done.stderr.strip() or done.stdout.strip()}")

    def start(self, *settings: str) -> None:
        options = " ".join(
            [
                f"-p {self.port}",
                f"-k {self.folder}",
                "-c listen_addresses=127.0.0.1",
                "-c fsync=off",
                *settings,
            ]
        )
        self.run("pg_ctl", "start", "-w", "-D", str(self.data), "-l", str(self.folder / "log"), "-o", options)

    def stop(self, mode: str = "fast") -> None:
        self.run("pg_ctl", "stop", "-w", "-m", mode, "-D", str(self.data))

    def promote(self) -> None:
        self.run("pg_ctl", "promote", "-w", "-D", str(self.data))


def _folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="hermes-replica-"))
    if os.geteuid() == 0:
        shutil.chown(folder, _ACCOUNT, _ACCOUNT)
    return folder


def _sql(node: Node, statement: str) -> None:
    import psycopg

    with psycopg.connect(
        host="127.0.0.1", port=node.port, user="postgres", dbname="postgres", autocommit=True
    ) as c:
        c.execute(statement)


@contextmanager
def primary_and_standby(
    *, synchronous: bool = True, standby_settings: tuple[str, ...] = ()
) -> Iterator[tuple[Node, Node]]:
    """A started primary and a hot standby streaming from it (with ``standby_settings``,
    ``-c name=value`` server options); both removed afterwards."""
    pg_ctl = find_pg_ctl()
    if pg_ctl is None:
        pytest.skip("no PostgreSQL server binaries (pg_ctl): cannot start a primary and a standby")
    bindir = pg_ctl.resolve().parent  # the folder of all the server binaries, not a link to one
    primary = Node(bindir, _folder(), _free_port())
    standby = Node(bindir, _folder(), _free_port())
    try:
        primary.run("pg_ctl", "init", "-s", "-D", str(primary.data), "-o", "--auth=trust -U postgres")
        primary.start("-c wal_level=replica", "-c max_wal_senders=5", "-c hot_standby=on")
        standby.run(
            "pg_basebackup", "-D", str(standby.data), "-R", "-X", "stream",
            "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres",
        )  # fmt: skip
        standby.start("-c hot_standby=on", "-c hot_standby_feedback=off", *standby_settings)
        if synchronous:
            _sql(primary, "ALTER SYSTEM SET synchronous_standby_names = '*'")
            _sql(primary, "SELECT pg_reload_conf()")
        _wait_streaming(primary)
        yield primary, standby
    finally:
        for node in (standby, primary):
            with suppress(RuntimeError, subprocess.TimeoutExpired):  # never started, or already stopped
                node.stop("immediate")
            shutil.rmtree(node.folder, ignore_errors=True)


def _wait_streaming(primary: Node, timeout_s: float = 30.0) -> None:
    import psycopg

    deadline = time.monotonic() + timeout_s
    while True:
        with psycopg.connect(host="127.0.0.1", port=primary.port, user="postgres", dbname="postgres") as c:
            row = c.execute("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'").fetchone()
        if row and row[0]:
            return
        if time.monotonic() > deadline:
            raise RuntimeError("the standby did not start streaming")
        time.sleep(0.1)


def failover_url(primary: Node, standby: Node, database: str = "postgres") -> str:
    """A libpq multi-host URL naming both nodes, taking whichever accepts writes."""
    return (
        f"postgresql+psycopg://postgres@/{database}?host=127.0.0.1:{primary.port}"
        f"&host=127.0.0.1:{standby.port}&target_session_attrs=read-write"
    )
