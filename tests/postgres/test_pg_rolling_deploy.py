"""Rolling deploy: the previous release keeps working on a database at this release's head.

During a rolling deploy the database is upgraded first, and replicas of the previous
release keep serving until they are replaced. Each of :data:`PREVIOUS_RELEASES` (main
before the online migrations, and the last main before the newest revision) is installed
from git into a scratch virtual environment (cached under ``~/.cache/hermes_store_test``,
keyed by commit and Python version, so it is built once per machine; pip reuses its wheel
cache) and, in its own process, creates a session, appends, searches, lists and exports on
a database this release upgraded to head. This release then finds what the previous one
wrote (the trigger gave its rows their search vectors and grams).

Marked ``slow``: the first run installs the previous release (tens of seconds).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from support import REPO_ROOT, migrate_to

from hermes_store import SessionDB

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

PREVIOUS_RELEASES = ("13d1553", "45bc335", "3f120b6", "74727db")
"""Main before the online migrations (at revision 0011), main before revision 0017, main
before revision 0018 (which replaced the search indexes that release reads), and main
before revision 0019 (upstream's schema 17: new columns, NOT NULL with defaults, that
release never writes)."""

PREVIOUS_RELEASE_CALLS = textwrap.dedent(
    """
    import json, sys, warnings
    warnings.simplefilter("ignore")
    from hermes_store import SessionDB
    db = SessionDB(url=sys.argv[1])
    db.create_session("old-release", "telegram", model="m")
    first = db.append_message("old-release", "user", "rolling deploy kubernetes question 部署")
    second = db.append_message("old-release", "assistant", "answer", tool_name="terminal")
    print(json.dumps({
        "ids": [first, second],
        "search": [hit["id"] for hit in db.search_messages("kubernetes")],
        "tool_search": [hit["id"] for hit in db.search_messages("terminal")],
        "pair_search": [hit["id"] for hit in db.search_messages("Kubernetes 部署")],
        "phrase_search": [hit["id"] for hit in db.search_messages('"deploy kubernetes"')],
        "listed": [row["id"] for row in db.list_sessions_rich(limit=10)],
        "exported": [m["content"] for m in db.export_session("old-release")["messages"]],
        "messages": [m["content"] for m in db.get_messages("old-release")],
    }))
    db.close()
    """
)


CACHE_VARIABLE = "HERMES_TEST_CACHE_DIR"
"""Where the previous release's environment is kept between runs (default
``~/.cache/hermes_store_test``): outside the checkout and pytest's cache, so a fresh clone
on the same machine (a CI job) reuses it."""


def _cache_root(release: str) -> Path:
    configured = os.environ.get(CACHE_VARIABLE, "").strip()
    base = Path(configured) if configured else Path.home() / ".cache" / "hermes_store_test"
    version = f"py{sys.version_info.major}.{sys.version_info.minor}"
    return base / f"previous-release-{release}-{version}"


@pytest.fixture(scope="session", params=PREVIOUS_RELEASES)
def previous_release_python(request: pytest.FixtureRequest) -> Path:
    """The Python of a virtual environment holding the previous release (built once per machine).

    Keyed by the release's commit and this interpreter's version. Concurrent runs (xdist
    workers of other sessions, other checkouts) take an exclusive lock while one of them
    builds; the environment is built under a private name and renamed into place only once
    complete, so a run killed half-way leaves nothing that looks usable.
    """
    release = str(request.param)
    root = _cache_root(release)
    root.mkdir(parents=True, exist_ok=True)
    python = root / "venv" / "bin" / "python"
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.exists():
            return python
        with tempfile.TemporaryDirectory(prefix="build-", dir=root) as scratch:
            source = Path(scratch) / "src"
            source.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(REPO_ROOT), "archive", "--format=tar", release],
                capture_output=True,
                check=False,
            )
            if archive.returncode != 0:
                pytest.skip(f"commit {release} is not in this checkout: {archive.stderr.decode().strip()}")
            subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
            partial = Path(scratch) / "venv"
            subprocess.run([sys.executable, "-m", "venv", str(partial)], check=True)
            install = subprocess.run(
                [str(partial / "bin" / "pip"), "install", "-q", f"{source}[postgres]"],
                capture_output=True,
                text=True,
                check=False,
                timeout=600,
            )
            if install.returncode != 0:
                pytest.skip(f"pip could not install the previous release: {install.stderr.strip()[-300:]}")
            partial.rename(root / "venv")
    return python


def test_the_previous_release_works_on_a_database_at_head(
    pg_url: str, previous_release_python: Path, tmp_path: Path
) -> None:
    migrate_to(pg_url, "head")
    current = SessionDB(url=pg_url)
    current.create_session("new-release", "cli")
    current.append_message("new-release", "user", "written by this release about kubernetes, 部署")
    # Outside the checkout, so that the previous release is imported from its environment.
    result = subprocess.run(
        [str(previous_release_python), "-c", PREVIOUS_RELEASE_CALLS, pg_url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    first, second = seen["ids"]
    assert sorted(seen["search"]) == sorted([1, first])
    assert seen["tool_search"] == [second]
    assert sorted(seen["pair_search"]) == sorted([1, first])
    assert seen["phrase_search"] == [first]
    assert "old-release" in seen["listed"] and "new-release" in seen["listed"]
    assert seen["exported"] == seen["messages"] == ["rolling deploy kubernetes question 部署", "answer"]
    try:
        assert {hit["id"] for hit in current.search_messages("kubernetes")} == {1, first}
        assert [hit["id"] for hit in current.search_messages("rolling deploy")] == [first]
        assert [hit["id"] for hit in current.search_messages('"deploy kubernetes"')] == [first]
        # The trigger gave the previous release's row this release's grams (revision 0016).
        assert {hit["id"] for hit in current.search_messages("KUBERNETES 部署")} == {1, first}
    finally:
        current.close()
