"""Rolling deploy: the previous release keeps working on a database at this release's head.

During a rolling deploy the database is upgraded first, and replicas of the previous
release keep serving until they are replaced. The previous release — this repository at
:data:`PREVIOUS_RELEASE` (main before the online migrations) — is installed from git into
a scratch virtual environment (cached in pytest's cache directory, so it is built once;
pip reuses its wheel cache) and, in its own process, creates a session, appends, searches,
lists and exports on a database this release upgraded to head. This release then finds
what the previous one wrote (the trigger gave its rows their search vectors).

Marked ``slow``: the first run installs the previous release (tens of seconds).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pg_catalog import alembic
from support import REPO_ROOT

from hermes_store import SessionDB

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

PREVIOUS_RELEASE = "13d1553"

PREVIOUS_RELEASE_CALLS = textwrap.dedent(
    """
    import json, sys, warnings
    warnings.simplefilter("ignore")
    from hermes_store import SessionDB
    db = SessionDB(url=sys.argv[1])
    db.create_session("old-release", "telegram", model="m")
    first = db.append_message("old-release", "user", "rolling deploy kubernetes question")
    second = db.append_message("old-release", "assistant", "answer", tool_name="terminal")
    print(json.dumps({
        "ids": [first, second],
        "search": [hit["id"] for hit in db.search_messages("kubernetes")],
        "tool_search": [hit["id"] for hit in db.search_messages("terminal")],
        "listed": [row["id"] for row in db.list_sessions_rich(limit=10)],
        "exported": [m["content"] for m in db.export_session("old-release")["messages"]],
        "messages": [m["content"] for m in db.get_messages("old-release")],
    }))
    db.close()
    """
)


@pytest.fixture(scope="session")
def previous_release_python(request: pytest.FixtureRequest) -> Path:
    """The Python of a virtual environment holding the previous release (built once)."""
    root = Path(request.config.cache.mkdir(f"previous-release-{PREVIOUS_RELEASE}"))
    python = root / "venv" / "bin" / "python"
    if python.exists():
        return python
    source = root / "src"
    source.mkdir(exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", "--format=tar", PREVIOUS_RELEASE],
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        pytest.skip(f"commit {PREVIOUS_RELEASE} is not in this checkout: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv.partial")], check=True)
    install = subprocess.run(
        [str(root / "venv.partial" / "bin" / "pip"), "install", "-q", f"{source}[postgres]"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if install.returncode != 0:
        pytest.skip(f"pip could not install the previous release: {install.stderr.strip()[-300:]}")
    (root / "venv.partial").rename(root / "venv")
    return python


def test_the_previous_release_works_on_a_database_at_head(
    pg_url: str, previous_release_python: Path, tmp_path: Path
) -> None:
    alembic(pg_url, "upgrade", "head")
    current = SessionDB(url=pg_url)
    current.create_session("new-release", "cli")
    current.append_message("new-release", "user", "written by this release about kubernetes")
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
    assert "old-release" in seen["listed"] and "new-release" in seen["listed"]
    assert seen["exported"] == seen["messages"] == ["rolling deploy kubernetes question", "answer"]
    try:
        assert {hit["id"] for hit in current.search_messages("kubernetes")} == {1, first}
        assert [hit["id"] for hit in current.search_messages("rolling deploy")] == [first]
    finally:
        current.close()
