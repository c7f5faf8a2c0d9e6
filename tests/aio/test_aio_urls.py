"""One URL for a service: asyncio driver URLs work wherever the sync tools take a URL.

Alembic and the ``hermes-store`` command stay synchronous; given
``sqlite+aiosqlite://…``, ``postgresql+asyncpg://…`` or ``postgresql+psycopg_async://…``
they use the sync driver for the same database. ``AsyncSessionDB`` maps the other way.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from support import REPO_ROOT, subprocess_env

from hermes_store import SessionDB
from hermes_store.aio import resolve_async_url
from hermes_store.db.engine import resolve_url
from hermes_store.db.urls import async_driver_url, is_async_url, sync_driver_url
from hermes_store.schema.revisions import history

MAPPINGS = [
    ("sqlite+aiosqlite:////data/state.db", "sqlite:////data/state.db"),
    ("postgresql+asyncpg://u:p@db:5432/hermes", "postgresql+psycopg://u:p@db:5432/hermes"),
    (
        "postgresql+psycopg_async://u:p@db/hermes?sslmode=require",
        "postgresql+psycopg://u:p@db/hermes?sslmode=require",
    ),
]


@pytest.mark.parametrize(("async_url", "sync_url"), MAPPINGS)
def test_async_driver_urls_map_to_the_sync_driver_for_the_same_database(
    async_url: str, sync_url: str
) -> None:
    url = sa.make_url(async_url)
    assert is_async_url(url)
    assert sync_driver_url(url).render_as_string(hide_password=False) == sync_url
    assert resolve_url(async_url).render_as_string(hide_password=False) == sync_url
    assert async_driver_url(url) == url, "an asyncio driver the caller named is kept"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("sqlite:////data/state.db", "sqlite+aiosqlite:////data/state.db"),
        ("postgresql://u@db/hermes", "postgresql+psycopg_async://u@db/hermes"),
        ("postgresql+psycopg://u@db/hermes", "postgresql+psycopg_async://u@db/hermes"),
        ("postgresql+asyncpg://u@db/hermes", "postgresql+asyncpg://u@db/hermes"),
    ],
)
def test_the_async_store_maps_sync_urls_to_asyncio_drivers(given: str, expected: str) -> None:
    assert resolve_async_url(given).render_as_string(hide_password=False) == expected


def test_a_plain_path_is_an_aiosqlite_url(tmp_path: Path) -> None:
    url = resolve_async_url(tmp_path / "state.db")
    assert url.drivername == "sqlite+aiosqlite"
    assert url.database == str(tmp_path / "state.db")


def test_backends_without_an_asyncio_driver_are_refused() -> None:
    with pytest.raises(ValueError, match="no asyncio driver"):
        async_driver_url(sa.make_url("mysql+pymysql://u@db/hermes"))


def test_the_sync_store_accepts_an_aiosqlite_url(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionDB(f"sqlite+aiosqlite:///{path}") as db:
        assert db.engine.url.drivername == "sqlite"
        db.create_session("s", "cli")
    with SessionDB(path) as again:
        assert again.get_session("s") is not None


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, *command],
        cwd=REPO_ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"{command} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def test_alembic_and_the_cli_take_an_aiosqlite_url(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
    _run("-m", "alembic", "-x", f"url={url}", "upgrade", "head")
    assert history().head in _run("-m", "alembic", "-x", f"url={url}", "current").stdout
    with SessionDB(tmp_path / "state.db") as db:
        db.create_session("made-by-the-library", "cli")
    assert "made-by-the-library" in _run("-m", "hermes_store.cli", "--url", url, "sessions").stdout


@pytest.mark.parametrize("driver", ["asyncpg", "psycopg_async"])
def test_alembic_and_the_cli_take_asyncio_postgresql_urls(aio_pg_url: str, driver: str) -> None:
    url = sa.make_url(aio_pg_url).set(drivername=f"postgresql+{driver}").render_as_string(hide_password=False)
    _run("-m", "alembic", "-x", f"url={url}", "upgrade", "head")
    assert history().head in _run("-m", "alembic", "-x", f"url={url}", "current").stdout
    assert "postgresql" in _run("-m", "hermes_store.cli", "--url", url, "info").stdout.lower()


def test_the_async_store_refuses_what_the_sync_store_refuses(tmp_path: Path) -> None:
    from hermes_store.aio import AsyncSessionDB
    from hermes_store.errors import UnsupportedURL

    with pytest.raises(UnsupportedURL):
        AsyncSessionDB("mysql+aiomysql://u@db/hermes")
    with pytest.raises(UnsupportedURL):
        AsyncSessionDB(url=str(tmp_path / "not-a-url.db"))
    assert not (tmp_path / "not-a-url.db").exists()


def test_mapping_leaves_unknown_backends_for_the_backend_check_to_refuse() -> None:
    url = sa.make_url("foo://bar")
    assert not is_async_url(url)
    assert sync_driver_url(url) is url
