"""The built wheel is a complete, working distribution on its own.

The wheel is built from a copy of the sources (so the checkout is never written to),
installed into a plain directory, and used from a process that cannot see the checkout:
the migrations must travel inside the package as ``hermes_store.migrations``.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from support import REPO_ROOT, subprocess_env

REVISION_FILES = (
    "0001_initial_schema.py",
    "0002_messages_finish_reason.py",
    "0003_sessions_title.py",
    "0004_unique_session_titles.py",
    "0005_sessions_billing.py",
    "0006_messages_reasoning.py",
    "0007_messages_reasoning_content.py",
    "0008_sessions_api_call_count.py",
    "0009_messages_codex_message_items.py",
    "0010_trigram_fts.py",
    "0011_inline_fts_with_tool_fields.py",
    "0012_postgresql_search_at_scale.py",
    "0013_search_vector_kept_by_trigger.py",
    "0014_unicode61_search_vectors.py",
    "0015_stored_cjk_grams.py",
    "0016_latin_trigrams_in_stored_grams.py",
    "0017_word_pair_index.py",
    "0018_search_indexes_by_id_bucket.py",
    "0019_upstream_schema_17.py",
    "0020_drop_expression_cjk_grams_index.py",
)
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "hermes_state.py", "hermes_store", "migrations")


def copy_sources(target: Path) -> Path:
    target.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=ignore)
        elif source.exists():
            shutil.copy2(source, target / name)
    return target


def build_wheel(source: Path, outdir: Path) -> Path:
    if importlib.util.find_spec("build") is not None:
        command = [sys.executable, "-m", "build", "--wheel", "--outdir", str(outdir), str(source)]
    else:
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(outdir), str(source)]
    result = subprocess.run(
        command, cwd=source, env=subprocess_env(), capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    wheels = sorted(outdir.glob("hermes_store-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("wheel")
    return build_wheel(copy_sources(base / "src"), base / "dist")


def test_wheel_ships_typing_marker_and_the_whole_migration_history(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    required = {
        "hermes_store/__init__.py",
        "hermes_store/py.typed",
        "hermes_store/hermes_state.py",
        "hermes_state.py",
        "hermes_store/migrations/__init__.py",
        "hermes_store/migrations/env.py",
        "hermes_store/migrations/script.py.mako",
        "hermes_store/schema/sqlite_head.json",
        *(f"hermes_store/migrations/versions/{name}" for name in REVISION_FILES),
    }
    assert required <= names, sorted(required - names)
    shipped_revisions = {
        n.rsplit("/", 1)[1] for n in names if n.startswith("hermes_store/migrations/versions/0")
    }
    assert shipped_revisions == set(REVISION_FILES)
    assert not any(n.startswith(("tests/", "migrations/")) for n in names)


def test_wheel_ships_every_subpackage_of_the_source_tree(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    source = REPO_ROOT / "hermes_store"
    subpackages = {init.parent.relative_to(REPO_ROOT).as_posix() for init in source.rglob("__init__.py")}
    missing = sorted(p for p in subpackages if f"{p}/__init__.py" not in names)
    assert not missing, f"pyproject.toml [tool.setuptools] packages lacks {missing}"


INSTALLED_PROBE = textwrap.dedent(
    """
    import json, sqlite3, sys
    import hermes_store
    import hermes_store.migrations
    import hermes_state
    assert hermes_state.SCHEMA_VERSION == 17 and hermes_state.__name__ == "hermes_store.hermes_state"

    hermes_store.upgrade(sys.argv[1])  # a new file: made from the shipped head snapshot
    stepped = sys.argv[1] + ".stepped"  # through the shipped Alembic scripts
    hermes_store.upgrade(stepped, "0011")
    hermes_store.upgrade(stepped)

    def read(path, sql):
        conn = sqlite3.connect(path)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()

    catalog = "SELECT type, name, sql FROM sqlite_master ORDER BY type, name"
    print(json.dumps({
        "package": hermes_store.__file__,
        "migrations": hermes_store.migrations.__file__,
        "alembic_imported": "alembic" in sys.modules,
        "revision": read(sys.argv[1], "SELECT version_num FROM alembic_version"),
        "schema_version": read(sys.argv[1], "SELECT version FROM schema_version"),
        "same_catalog": read(sys.argv[1], catalog) == read(stepped, catalog),
    }))
    """
)


def test_installed_wheel_upgrades_a_new_database_to_head_outside_the_checkout(
    wheel: Path, tmp_path: Path
) -> None:
    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(target), str(wheel)],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert install.returncode == 0, install.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    database = elsewhere / "data" / "state.db"
    result = subprocess.run(
        [sys.executable, "-c", INSTALLED_PROBE, str(database)],
        cwd=elsewhere,
        env=subprocess_env(PYTHONPATH=str(target)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(report["package"]).is_relative_to(target)
    assert Path(report["migrations"]).is_relative_to(target)
    assert report["revision"] == [["0020"]]
    assert report["schema_version"] == [[17]]
    assert report["alembic_imported"] is True  # the stepped file ran the installed scripts
    assert report["same_catalog"] is True
