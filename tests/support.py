"""Plain helpers shared by test modules (import them: ``from support import …``).

Fixtures live in ``conftest.py``; this module holds ordinary functions and constants so
that test modules never import a ``conftest`` by name.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
TESTS_DIR = REPO_ROOT / "tests"


def bench_upstream() -> types.ModuleType:
    """``benchmarks/upstream.py``, the reader of upstream Hermes from the local mirror,
    loaded by path (``benchmarks`` is not an installed package)."""
    spec = importlib.util.spec_from_file_location("bench_upstream", REPO_ROOT / "benchmarks" / "upstream.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sqlite_url(target: str | os.PathLike[str]) -> str:
    """A SQLAlchemy URL for ``target``: a path becomes ``sqlite:///<absolute path>``."""
    text = os.fspath(target)
    if "://" in text:
        return text
    return f"sqlite:///{Path(text).resolve()}"


EMPTY_PG_STORE = (
    "DELETE FROM telegram_dm_topic_bindings; DELETE FROM telegram_dm_topic_mode; "
    "DELETE FROM compression_locks; "
    "DELETE FROM messages; DELETE FROM sessions; DELETE FROM state_meta; "
    "SELECT setval(pg_get_serial_sequence('messages', 'id'), 1, false)"
)
"""Empties a PostgreSQL store's tables, ids restarting at 1, in one round trip. Deleting
the few rows a test leaves costs about 1 ms; ``TRUNCATE … RESTART IDENTITY`` costs 12-15 ms
(new files for every table and index), which over the suite's thousands of PostgreSQL
tests is most of a minute."""


@contextmanager
def pg_store_emptier(url: str) -> Iterator[Callable[[], None]]:
    """A function that empties the PostgreSQL store at ``url`` (:data:`EMPTY_PG_STORE`) on
    one connection kept while the block lasts: a connection per test (a store's raw
    ``_conn``, or a whole companion store for the asyncio API) costs 10-12 ms of the
    23-41 ms a PostgreSQL test's store costs."""
    import psycopg
    from sqlalchemy import make_url

    conninfo = make_url(url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        yield lambda: connection.execute(EMPTY_PG_STORE)  # type: ignore[arg-type]


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for child processes: no inherited store location settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("HERMES_STORE_URL", "HERMES_HOME")}
    env.update(extra)
    return env


def run_alembic(
    url: str | os.PathLike[str], *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m alembic -x url=<url> <args>`` from the checkout, as a deploy would.

    With ``check`` (the default) a non-zero exit fails the test, showing alembic's output.
    """
    command = [sys.executable, "-m", "alembic", "-x", f"url={sqlite_url(url)}", *args]
    result = subprocess.run(
        command, cwd=REPO_ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=120
    )
    if check and result.returncode != 0:
        pytest.fail(
            f"{' '.join(args)} exited {result.returncode}\n"
            f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )
    return result


def migrate_to(url: str | os.PathLike[str], revision: str) -> None:
    """Arrange a test's starting point: bring ``url`` (a URL or a SQLite path) to
    ``revision`` in this process, with :mod:`hermes_store.schema.migrate` (Alembic's own
    commands on the shipped scripts, as the CLI runs them).

    Only for building the database a test starts from or compares with: the step a test
    is about runs the real ``alembic`` command (:func:`run_alembic`). A subprocess costs
    0.6-1 s of CPU to start Python and import SQLAlchemy and Alembic; the suite's
    arrangements made about forty of them.
    """
    from hermes_store.schema import migrate

    migrate.upgrade(sqlite_url(url), revision)


# The sanitiser's example table, as upstream's outputs. Shared by
# the unit tests of the function and the SessionDB behavioural tests of its static method.
UPSTREAM_SANITIZER_ROWS = [
    ("hello world", "hello world"),
    ("C++", "C"),
    ('"unterminated', "unterminated"),
    ("(problem", "problem"),
    ("{test}", "test"),
    ("x^y", "x y"),
    ("hello AND", "hello"),
    ("OR world", "world"),
    ("NOT hello", "hello"),
    ("AND hello AND", "hello"),
    ("OR", ""),
    ("AND", ""),
    ("NOT", ""),
    ("***", ""),
    ("***foo", "foo"),
    ("foo***", "foo*"),
    ("foo **bar", "foo bar"),
    ("deploy*", "deploy*"),
    ("chat-send", '"chat-send"'),
    ("docker-compose-up", '"docker-compose-up"'),
    ('"chat-send"', '"chat-send"'),
    ('"my chat-send thing"', '"my chat-send thing"'),
    ("P2.2", '"P2.2"'),
    ("simulate.p2.test.ts", '"simulate.p2.test.ts"'),
    ("my-app.config.ts", '"my-app.config.ts"'),
    ("sp_new", '"sp_new"'),
    ("a_b_c", '"a_b_c"'),
    ("my.app_config.ts", '"my.app_config.ts"'),
    ("sp_new and 血管瘤", '"sp_new" and 血管瘤'),
    ("P2.2 OR simulate.p2", '"P2.2" OR "simulate.p2"'),
    ("foo.bar*", '"foo.bar"*'),
    ('"a" "b', '"a"  b'),
    # As upstream's sanitiser describes: lower-case operators at the ends count too.
    ("hello and", "hello"),
    ("__init__", '"__init__"'),
]


MESSAGE_COLUMNS = {
    "id",
    "session_id",
    "role",
    "content",
    "tool_call_id",
    "tool_calls",
    "tool_name",
    "timestamp",
    "token_count",
    "finish_reason",
    "reasoning",
    "reasoning_content",
    "reasoning_details",
    "codex_reasoning_items",
    "codex_message_items",
    "platform_message_id",
    "observed",
    "active",
    "compacted",
}
"""The 19 columns of a message row at schema 17 (what ``get_messages`` returns per message)."""
