"""A real PgBouncer in transaction mode, started in a temporary folder (tests, benchmarks).

It listens on a free local port, pools at most ``pool_size`` server connections to the
PostgreSQL server of the URL it is given, and keeps PgBouncer's stock settings otherwise
(no ``ignore_startup_parameters``, no prepared-statement support): what a managed
PostgreSQL's transaction pooler gives a client. Without the ``pgbouncer`` binary (Debian
package ``pgbouncer``), or as root without a ``postgres`` account to run it as, it raises
:class:`PoolerMissing` with the reason.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import sqlalchemy as sa

BINARY = shutil.which("pgbouncer") or (
    "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
)


class PoolerMissing(RuntimeError):
    """PgBouncer cannot be run here (the message says why)."""


def _free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def unavailable() -> str | None:
    """Why PgBouncer cannot be run here, or ``None`` when it can."""
    if BINARY is None:
        return "no PgBouncer: install Debian's pgbouncer package"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "PgBouncer will not run as root and there is no postgres account to run it as"
    return None


@contextmanager
def transaction_pooler(
    server_url: str, folder: Path, *, pool_size: int = 2, ignore_options: bool = False
) -> Iterator[str]:
    """Run PgBouncer in transaction mode in front of ``server_url``'s database; yields the
    same URL through the pooler. ``ignore_options``: the setting people add when the
    pooler refuses startup options (it then drops them silently)."""
    missing = unavailable()
    if missing is not None or BINARY is None:
        raise PoolerMissing(missing)
    url = sa.make_url(server_url)
    command = [BINARY]
    if os.geteuid() == 0:
        # PgBouncer refuses to run as root: it runs as the server's own account, in a
        # folder that account owns.
        account = pwd.getpwnam("postgres")
        folder = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
        os.chown(folder, account.pw_uid, account.pw_gid)
        command = ["runuser", "-u", "postgres", "--", BINARY]
    port = _free_port()
    user = url.username or "postgres"
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={url.host or '127.0.0.1'} port={url.port or 5432}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
        f"pool_mode = transaction\ndefault_pool_size = {pool_size}\nmax_client_conn = 500\n"
        f"logfile = {folder / 'pgbouncer.log'}\npidfile = {folder / 'pgbouncer.pid'}\n"
        + ("ignore_startup_parameters = options\n" if ignore_options else "")
    )
    process = subprocess.Popen(
        [*command, str(folder / "pgbouncer.ini")], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log = (
                        (folder / "pgbouncer.log").read_text() if (folder / "pgbouncer.log").exists() else ""
                    )
                    raise RuntimeError(f"PgBouncer did not start: {log[-2000:]}") from None
                time.sleep(0.05)
        yield url.set(host="127.0.0.1", port=port).render_as_string(hide_password=False)
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
