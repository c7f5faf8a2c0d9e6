"""Every expected failure is one clear line: a StoreError in the library, ``Error: …`` in the CLI.

Unknown or unsupported URL schemes, a missing driver (naming the extra
to install), an unreachable server and bad credentials never show a traceback, and a
mistyped URL never creates a file.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from support import subprocess_env

from hermes_store import (
    AuthenticationFailed,
    MissingDriver,
    ServerUnavailable,
    SessionDB,
    StoreError,
    UnsupportedURL,
    create_engine,
)

UNSUPPORTED = ["foo://bar", "mysql://u@h/db", "mssql+pyodbc://u@dsn", "postgresql+nosuchdriver://u@h/db"]
NOT_URLS = ["::::", "state.db", "", "postgresql+psycopg:/missing-slash"]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_cli(cwd: Path, *args: str, block_psycopg: bool = False) -> subprocess.CompletedProcess[str]:
    prelude = "sys.modules['psycopg'] = None; " if block_psycopg else ""
    code = "import sys; " + prelude + "from hermes_store.cli import main; main(sys.argv[1:])"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for needle in needles:
        assert needle in lines[0]


@pytest.mark.parametrize("url", UNSUPPORTED)
def test_unsupported_url_is_a_store_error(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsupportedURL, match="sqlite:///PATH or postgresql"):
        SessionDB(url=url)
    with pytest.raises(UnsupportedURL):
        create_engine(url)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", NOT_URLS)
def test_url_argument_that_is_not_a_url_creates_nothing(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsupportedURL, match="not a database URL"):
        SessionDB(url=url)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", [*UNSUPPORTED, "::::"])
def test_cli_reports_unsupported_urls_on_one_line(url: str, tmp_path: Path) -> None:
    result = run_cli(tmp_path, "--url", url, "sessions")
    assert_one_line_error(result, "sqlite:///PATH")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["postgresql+psycopg://u@127.0.0.1/db", "postgresql://u@127.0.0.1/db"])
def test_missing_driver_names_the_extra_to_install(url: str, tmp_path: Path) -> None:
    result = run_cli(tmp_path, "--url", url, "sessions", block_psycopg=True)
    assert_one_line_error(result, "pip install 'hermes-store[postgres]'")
    probe = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from hermes_store import SessionDB, MissingDriver\n"
        "try:\n    SessionDB(url=sys.argv[1])\n"
        "except MissingDriver as exc:\n    print(exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, url], capture_output=True, text=True, timeout=60, check=True
    )
    assert "pip install 'hermes-store[postgres]'" in result.stdout
    assert issubclass(MissingDriver, StoreError)


def test_unreachable_server_is_server_unavailable(tmp_path: Path) -> None:
    url = f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/db"
    with pytest.raises(ServerUnavailable, match="cannot reach the PostgreSQL server"):
        SessionDB(url=url)
    assert_one_line_error(run_cli(tmp_path, "--url", url, "sessions"), "cannot reach the PostgreSQL server")
    assert_one_line_error(run_cli(tmp_path, "--url", url, "info"), "cannot reach the PostgreSQL server")


def test_unknown_host_is_server_unavailable() -> None:
    with pytest.raises(ServerUnavailable):
        SessionDB(url="postgresql+psycopg://postgres@no-such-host.invalid/db")


def test_bad_credentials_are_authentication_failed(pg_admin_url: str, tmp_path: Path) -> None:
    url = sa.make_url(pg_admin_url).set(username="hermes_no_such_role", password="wrong")
    rendered = url.render_as_string(hide_password=False)
    with pytest.raises(AuthenticationFailed, match="refused the credentials"):
        SessionDB(url=rendered)
    result = run_cli(tmp_path, "--url", rendered, "sessions")
    assert_one_line_error(result, "refused the credentials")
    assert "wrong" not in result.stderr, "the password must never be printed"
