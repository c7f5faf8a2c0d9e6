"""Shared fixtures of the hermes_store test suite.

Sections (add new fixtures to the section they belong to, or start a new one):

* paths — where things live: the checkout, a fresh database path per test;
* alembic — the real ``alembic`` command line, run in a subprocess;
* pytest-alembic — the ``alembic_config`` / ``alembic_engine`` fixtures its built-in
  tests (``tests/migrations/test_builtin.py``) are driven by;
* postgresql — ``pg_admin_url``: a server to create databases on (``tests/pg_server.py``
  says which: ``HERMES_TEST_PG_URL``, a throwaway cluster, or none — then a skip);
  ``pg_url``: a new, empty database on it per test;
* reporting — skips summarised by reason, one line each.

Legacy upstream databases are built with ``tests/legacy_db.py`` (plain sqlite3).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from hermes_store.db.engine import create_engine
from hermes_store.schema.migrate import alembic_config as build_alembic_config

if TYPE_CHECKING:
    from alembic.config import Config

TESTS_DIR = Path(__file__).resolve().parent
# Test modules import helpers (support, legacy_db) by plain name, whatever pytest's import mode.
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

import pg_server  # noqa: E402
from support import REPO_ROOT, run_alembic  # noqa: E402

from hermes_store.schema.migration_ops import BATCH_ROWS_ENV  # noqa: E402

# Backfills in batches of 100 rows: the migration and kill tests cross batch boundaries on
# a few hundred messages instead of thousands (the batch size is what they test, not the
# row count). Set before any test module reads it; child processes inherit it.
os.environ.setdefault(BATCH_ROWS_ENV, "100")

# --- paths -------------------------------------------------------------------------------


@pytest.fixture
def repo_root() -> Path:
    """The checkout's root (holds alembic.ini and pyproject.toml)."""
    return REPO_ROOT


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A not-yet-existing database file in this test's temporary directory."""
    return tmp_path / "state.db"


# --- alembic command line ----------------------------------------------------------------

AlembicCli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def alembic_cli() -> AlembicCli:
    """``alembic_cli(url_or_path, *args, check=True)``: the real alembic command (subprocess)."""
    return run_alembic


# --- pytest-alembic ----------------------------------------------------------------------


@pytest.fixture
def alembic_config() -> Config:
    """The shipped migrations, configured in code exactly as ``hermes_store.schema.migrate`` does."""
    return build_alembic_config()


@pytest.fixture
def alembic_engine(tmp_path: Path) -> Iterator[Engine]:
    """A file-backed SQLite engine built by hermes_store (WAL, foreign keys, 0600 file)."""
    engine = create_engine(tmp_path / "pytest_alembic.db")
    try:
        yield engine
    finally:
        engine.dispose()


# --- postgresql --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """A PostgreSQL URL on which tests may create and drop databases of their own.

    ``HERMES_TEST_PG_URL`` when set; otherwise a throwaway server for this process (each
    xdist worker starts its own) when the binaries are installed; otherwise a skip — or a
    failure with ``HERMES_TEST_REQUIRE_PG=1``.
    """
    configured = os.environ.get(pg_server.PG_URL_VARIABLE, "").strip()
    if configured:
        yield configured
        pg_server.finish_drops()  # the databases tests dropped in the background
        return
    if pg_server.mode() == "none":
        reason = "no PostgreSQL: HERMES_TEST_PG_URL is unset and no server binaries (pg_ctl) are installed"
        if os.environ.get(pg_server.REQUIRE_VARIABLE):
            pytest.fail(reason)
        pytest.skip(reason)
    with pg_server.ThrowawayServer() as server:
        yield server.url("postgres")
        pg_server.finish_drops()


def _new_database(pg_admin_url: str, template: str | None = None) -> Iterator[str]:
    """Create a database (a copy of ``template`` if given), yield its URL, drop it later."""
    with ExitStack() as stack:
        try:
            database = pg_server.scratch_database(
                pg_admin_url, "hermes_t", drop_in_background=True, template=template
            )
            url = stack.enter_context(database)
        except sa.exc.OperationalError as exc:
            if os.environ.get("HERMES_TEST_REQUIRE_PG"):
                raise
            admin = sa.make_url(pg_admin_url).render_as_string()
            pytest.skip(f"PostgreSQL at {admin} is unreachable: {exc.orig}")
        yield url


@pytest.fixture
def pg_url(pg_admin_url: str) -> Iterator[str]:
    """URL of a new, empty PostgreSQL database, dropped after the test (in the background)."""
    yield from _new_database(pg_admin_url)


def _create_store(url: str) -> None:
    from hermes_store import SessionDB

    SessionDB(url=url).close()


@pytest.fixture(scope="session")
def pg_head_template(shared_pg_database: pg_server.SharedDatabase) -> str:
    """Name of a database holding a store ``SessionDB`` created (once per run), for
    ``CREATE DATABASE … TEMPLATE``: nothing stays connected to it."""
    return str(sa.make_url(shared_pg_database("head", _create_store)).database)


@pytest.fixture
def pg_head_url(pg_admin_url: str, pg_head_template: str) -> Iterator[str]:
    """URL of a new PostgreSQL database already at head, dropped after the test: a copy of
    :func:`pg_head_template`. For tests about what a store does, not how one is created: a
    copy costs a fraction of running every migration."""
    yield from _new_database(pg_admin_url, pg_head_template)


@pytest.fixture(scope="session")
def shared_pg_database(
    pg_admin_url: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[pg_server.SharedDatabase]:
    """``shared_pg_database(key, build)``: URL of a PostgreSQL database ``build(url)`` filled,
    built once per test run, for databases that tests only read or copy (``TEMPLATE``).

    Under xdist with a configured server (``HERMES_TEST_PG_URL``) the first worker to ask
    builds it while holding a lock in the run's registry folder (made by the controller,
    :data:`SHARED_REGISTRY_VARIABLE`), the others wait and use it by name, and the
    controller drops it once every worker is done (:func:`pytest_sessionfinish`). In one
    process, or with a throwaway server per worker, this process builds its own and drops
    it at the end. (Built per worker, a 13 s store was built three or four times a run.)
    """
    # An xdist worker of this run (not merely a child pytest that inherited its environment),
    # whose controller made the registry folder (pytest_configure).
    worker = hasattr(request.config, "workerinput") and pg_server.mode() == "configured"
    shared_folder = os.environ.get(SHARED_REGISTRY_VARIABLE) if worker else None
    shared = bool(shared_folder)
    registry = Path(shared_folder) if shared_folder else tmp_path_factory.mktemp("shared-pg")

    def get(key: str, build: Callable[[str], None]) -> str:
        return pg_server.shared_database(pg_admin_url, key, build, registry)[0]

    yield get
    if not shared:
        pg_server.drop_shared(pg_admin_url, registry)


SHARED_REGISTRY_VARIABLE = "HERMES_TEST_SHARED_PG_REGISTRY"
"""The folder where this run's xdist workers record the databases they share: made by the
controller before it starts them (they inherit its environment), emptied and removed by it
once they are done."""
_SHARED_REGISTRY = pytest.StashKey[Path]()


def _make_shared_registry(config: pytest.Config) -> None:
    """The xdist controller: a new registry folder for this run's workers."""
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    folder = Path(tempfile.mkdtemp(prefix="hermes-shared-pg-"))
    os.environ[SHARED_REGISTRY_VARIABLE] = str(folder)
    config.stash[_SHARED_REGISTRY] = folder


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The xdist controller, once every worker is done: drop the shared databases."""
    folder = session.config.stash.get(_SHARED_REGISTRY, None)
    if folder is None:
        return
    admin_url = os.environ.get(pg_server.PG_URL_VARIABLE, "").strip()
    try:
        if admin_url:
            pg_server.drop_shared(admin_url, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --- coverage gate -----------------------------------------------------------------------

POSTGRES_ONLY_MODULES = (
    "*/hermes_store/db/column_types.py",
    "*/hermes_store/admin/copy_target.py",
    "*/hermes_store/admin/postgresql_head_schema.py",
    "*/hermes_store/search/postgres/*",
    "*/hermes_store/db/backends/postgresql.py",
    "*/hermes_store/db/transaction_pooler.py",
    "*/hermes_store/uow/standby_reads.py",
)
"""Modules that only PostgreSQL runs: measured when a server is available, left out of the
coverage gate on a machine with none (their tests skip there, so 0 % would say nothing
about the code; everything that did run is still held to the 90 % bar)."""


LONGEST_MODULES = {
    "search/test_search_oracle.py": 53,
    "poolers/test_pgbouncer.py": 40,
    "reliability/test_reliability_input.py": 49,
    "migrations/test_legacy_adoption.py": 38,
    "test_benchmarks_smoke.py": 37,
    "postgres/test_pg_migration_0012.py": 26,
    "postgres/test_pg_upgrade_killed.py": 25,
    "postgres/test_pg_migration_0014.py": 24,
    "postgres/test_pg_migration_0016.py": 23,
    "postgres/test_pg_search_plans.py": 22,
    "migrations/test_offline_sql.py": 22,
    "postgres/test_pg_migration_0017.py": 21,
    "postgres/test_pg_partition.py": 20,
    "postgres/test_pg_faults.py": 18,
    "postgres/test_pg_migration_0015.py": 18,
    "reliability/test_reliability_faults.py": 16,
    "postgres/test_pg_migration_0018.py": 15,
    "postgres/test_pg_open_policy.py": 11,
    "postgres/test_pg_copy.py": 40,
}
"""The modules whose tests take longest, with their seconds in all under the suite's own
load (a full run's per-test times; modules a change has since shortened, scaled by their
speed-up run alone); modules holding a ``slow`` test count 10 s. See
:func:`pytest_collection_modifyitems`. (``test_pg_search_plans`` is here so one worker
builds its shared store while the others run other modules.)"""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the longest modules first, spread over the xdist workers.

    pytest-xdist's ``worksteal`` first hands each of its ``n`` workers one contiguous
    ``n``-th of the collection, and a worker that runs dry steals from the end of another
    one's share. A long module collected late is then started last and keeps the run going
    while the other workers sit idle; all of them at the front would go to one worker. So
    each share begins with its part of the long modules (balanced by their seconds), then
    the rest in collection order. Whole modules move, so module fixtures are built once.
    """
    workers = max(1, int(getattr(config, "workerinput", {}).get("workercount", 1)))
    modules: dict[Path, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.path, []).append(item)
    weights: dict[Path, int] = {}
    for path, members in modules.items():
        name = path.relative_to(TESTS_DIR).as_posix() if path.is_relative_to(TESTS_DIR) else ""
        if name in LONGEST_MODULES:
            weights[path] = LONGEST_MODULES[name]
        elif any(member.get_closest_marker("slow") is not None for member in members):
            weights[path] = 10
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    loads = [0] * workers
    for path in sorted(weights, key=lambda p: -weights[p]):
        lightest = loads.index(min(loads))
        shares[lightest] += modules[path]
        loads[lightest] += weights[path]
    rest = [item for item in items if item.path not in weights]
    ordered: list[pytest.Item] = []
    remaining = len(items)
    for worker, share in enumerate(shares):
        size = remaining // (workers - worker)  # what worksteal sends this worker first
        filler = max(0, size - len(share))
        share += rest[:filler]
        rest = rest[filler:]
        ordered += share
        remaining -= len(share)
    items[:] = ordered + rest


def pytest_configure(config: pytest.Config) -> None:
    """Make the xdist workers' shared-database registry; without PostgreSQL, keep
    PostgreSQL-only modules out of the coverage report and gate."""
    _make_shared_registry(config)
    if hasattr(config, "workerinput") or pg_server.mode() != "none":
        return  # workers only measure; the controller reports and applies the gate
    plugin = config.pluginmanager.getplugin("_cov")
    controller = getattr(plugin, "cov_controller", None)
    # With xdist the controller reports through a second Coverage object that combines
    # the workers' data; both must leave the modules out.
    reporters = [getattr(controller, name, None) for name in ("cov", "combining_cov")]
    reporters = [cov for cov in reporters if cov is not None]
    if not reporters:
        return  # no --cov: nothing to gate
    for cov in reporters:
        omitted = list(cov.get_option("report:omit") or [])
        cov.set_option("report:omit", [*omitted, *POSTGRES_ONLY_MODULES])
    config.stash[_COVERAGE_NOTE] = "no PostgreSQL on this machine: coverage gate leaves out " + ", ".join(
        POSTGRES_ONLY_MODULES
    )


_COVERAGE_NOTE = pytest.StashKey[str]()


# --- reporting ---------------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Summarise skips as counts by reason (one line per reason, not per test)."""
    note = terminalreporter.config.stash.get(_COVERAGE_NOTE, None)
    if note:
        terminalreporter.write_line(note)
    reasons: Counter[str] = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    if not reasons:
        return
    terminalreporter.section(f"{sum(reasons.values())} skipped, by reason", sep="-")
    for reason, count in reasons.most_common():
        terminalreporter.write_line(f"{count:5d}  {reason}")
