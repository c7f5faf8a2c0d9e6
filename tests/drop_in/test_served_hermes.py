"""The drop-in serves only the Hermes releases it names, and says so when another runs it.

Each case runs in its own interpreter, as Hermes does: the Hermes found (a source tree's
``pyproject.toml`` beside the modules being run, or an installed ``hermes-agent``
distribution) is looked up once per process, so a child process is the only honest test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from support import bench_upstream, subprocess_env

from hermes_store.drop_in.served_hermes import (
    ALLOW_UNSUPPORTED_HERMES_ENV,
    SERVED_HERMES_RELEASES,
)

OPEN_STORE = """
import json, logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="LOG %(levelname)s %(name)s %(message)s")
{before}
import hermes_state
report = {{}}
for attempt in range(2):
    try:
        db = hermes_state.SessionDB(sys.argv[1])
    except Exception as exc:
        report["error"] = type(exc).__name__
        report["bases"] = [c.__name__ for c in type(exc).__mro__]
        report["message"] = str(exc)
        report["recorded"] = hermes_state.format_session_db_unavailable()
    else:
        db.close()
        report["opened"] = report.get("opened", 0) + 1
print(json.dumps(report))
"""


def fake_hermes_tree(root: Path, version: str, pyproject: str | None = None) -> Path:
    """A Hermes source tree as Hermes runs from it: its top-level packages beside its
    ``pyproject.toml``."""
    tree = root / f"hermes-agent-{version}"
    (tree / "hermes_cli").mkdir(parents=True)
    (tree / "hermes_cli" / "__init__.py").write_text("")
    (tree / "pyproject.toml").write_text(
        pyproject or f'[project]\nname = "hermes-agent"\nversion = "{version}"\n'
    )
    return tree


def fake_installed_hermes(root: Path, version: str) -> Path:
    """A folder holding only an installed ``hermes-agent`` distribution's metadata."""
    site = root / "site"
    info = site / f"hermes_agent-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: hermes-agent\nVersion: {version}\n")
    return site


def child_env(**extra: str) -> dict[str, str]:
    """The child's environment: the override only where a test sets it, not inherited."""
    env = subprocess_env(**extra)
    if ALLOW_UNSUPPORTED_HERMES_ENV not in extra:
        env.pop(ALLOW_UNSUPPORTED_HERMES_ENV, None)
    return env


def run_child(
    code: str, tmp_path: Path, python_path: Path | None = None, **env: str
) -> tuple[dict[str, Any], list[str]]:
    """Run ``code`` with ``sys.argv[1]`` a store path; its JSON report and the log lines."""
    if python_path is not None:
        env["PYTHONPATH"] = str(python_path)
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "state.db")],
        cwd=tmp_path,
        env=child_env(HERMES_HOME=str(tmp_path / "home"), **env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    logs = [line for line in result.stderr.splitlines() if line.startswith("LOG ")]
    return json.loads(result.stdout.splitlines()[-1]), logs


def test_the_served_range_holds_the_followed_commit_and_no_later_release() -> None:
    assert "0.18.0" in SERVED_HERMES_RELEASES
    assert "0.18.0+local.build" in SERVED_HERMES_RELEASES
    for outside in ("0.17.0", "0.18.1", "0.18.1rc1", "0.20.3", "0.21.3", "1.0", "not a version", ""):
        assert outside not in SERVED_HERMES_RELEASES, outside
    assert str(SERVED_HERMES_RELEASES) == ">=0.18.0,<0.18.1"


def test_a_newer_hermes_tree_is_refused_in_one_line(tmp_path: Path) -> None:
    tree = fake_hermes_tree(tmp_path, "0.21.3")
    report, logs = run_child(OPEN_STORE.format(before="import hermes_cli"), tmp_path, tree)
    assert report["error"] == "UnsupportedHermes" and "StoreError" in report["bases"]
    message = report["message"]
    assert "\n" not in message
    assert "Hermes Agent 0.21.3" in message and ">=0.18.0,<0.18.1" in message
    assert ALLOW_UNSUPPORTED_HERMES_ENV in message and "hermes_state.py" in message
    assert message in report["recorded"]  # what Hermes prints when its store is unavailable
    assert "opened" not in report  # every construction is refused, not only the first
    assert not (tmp_path / "state.db").exists()  # refused before anything is written
    assert logs == []


def test_a_newer_installed_hermes_is_refused(tmp_path: Path) -> None:
    site = fake_installed_hermes(tmp_path, "0.20.3")
    report, _ = run_child(OPEN_STORE.format(before=""), tmp_path, site)
    assert report["error"] == "UnsupportedHermes"
    assert "Hermes Agent 0.20.3" in report["message"] and "\n" not in report["message"]


def test_the_tree_being_run_wins_over_stale_installed_metadata(tmp_path: Path) -> None:
    """An editable install keeps the version it was installed at after a ``git pull``; the
    tree is found through a top-level module as well as through a package."""
    tree = fake_hermes_tree(tmp_path, "0.21.3")
    (tree / "hermes_constants.py").write_text("")
    site = fake_installed_hermes(tmp_path, "0.18.0")
    report, _ = run_child(
        OPEN_STORE.format(before="import hermes_constants"),
        tmp_path,
        Path(f"{tree}{os.pathsep}{site}"),
    )
    assert report["error"] == "UnsupportedHermes" and "Hermes Agent 0.21.3" in report["message"]


def test_the_override_opens_the_store_and_warns_once_per_start(tmp_path: Path) -> None:
    tree = fake_hermes_tree(tmp_path, "0.21.3")
    code = OPEN_STORE.format(before="import hermes_cli")
    for _start in range(2):
        report, logs = run_child(code, tmp_path, tree, **{ALLOW_UNSUPPORTED_HERMES_ENV: "1"})
        assert report == {"opened": 2}
        assert len(logs) == 1, logs
        assert logs[0].startswith("LOG WARNING hermes_state ")
        assert "0.21.3" in logs[0] and ">=0.18.0,<0.18.1" in logs[0]


def test_hermes_at_the_followed_commit_is_served(tmp_path: Path) -> None:
    upstream = bench_upstream()
    pyproject = upstream.upstream_file("pyproject.toml", upstream.HEAD_COMMIT)
    if pyproject is None:
        pytest.skip("upstream's pyproject.toml cannot be read from the Hermes mirror")
    tree = fake_hermes_tree(tmp_path, "followed", pyproject)
    report, logs = run_child(OPEN_STORE.format(before="import hermes_cli"), tmp_path, tree)
    assert report == {"opened": 2}
    assert logs == []


def test_without_hermes_nothing_changes(tmp_path: Path) -> None:
    report, logs = run_child(OPEN_STORE.format(before=""), tmp_path)
    assert report == {"opened": 2}
    assert logs == []


def test_an_unrelated_tree_with_a_hermes_like_package_is_not_hermes(tmp_path: Path) -> None:
    tree = fake_hermes_tree(tmp_path, "9.9.9", '[project]\nname = "someone-else"\nversion = "9.9.9"\n')
    report, logs = run_child(OPEN_STORE.format(before="import hermes_cli"), tmp_path, tree)
    assert report == {"opened": 2}
    assert logs == []


def test_the_hermes_found_is_looked_up_once_per_process(tmp_path: Path) -> None:
    tree = fake_hermes_tree(tmp_path, "0.18.0")
    code = OPEN_STORE.format(
        before=(
            "import hermes_cli, hermes_state, pathlib\n"
            "hermes_state.SessionDB(sys.argv[1]).close()\n"
            f"pathlib.Path({str(tree / 'pyproject.toml')!r}).write_text("
            "'[project]\\nname = \"hermes-agent\"\\nversion = \"0.21.3\"\\n')"
        )
    )
    report, _ = run_child(code, tmp_path, tree)
    assert report == {"opened": 2}


def test_the_async_wrapper_is_refused_too(tmp_path: Path) -> None:
    tree = fake_hermes_tree(tmp_path, "0.21.3")
    code = textwrap.dedent(
        """
        import json, hermes_cli, hermes_state
        try:
            hermes_state.AsyncSessionDB(object())
        except Exception as exc:
            print(json.dumps({"error": type(exc).__name__}))
        else:
            print(json.dumps({}))
        """
    )
    report, _ = run_child(code, tmp_path, tree)
    assert report == {"error": "UnsupportedHermes"}


def test_a_name_the_module_lacks_is_refused_for_an_unserved_hermes(tmp_path: Path) -> None:
    """Hermes 0.20.3's gateway imports ``_default_db_path`` before it opens any store."""
    code = textwrap.dedent(
        """
        import json, sys
        if sys.argv[2:]:
            import hermes_cli
        try:
            from hermes_state import _default_db_path
        except Exception as exc:
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
        """
    )
    tree = fake_hermes_tree(tmp_path, "0.20.3")
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "state.db"), "hermes"],
        cwd=tmp_path,
        env=child_env(PYTHONPATH=str(tree)),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    refused = json.loads(result.stdout)
    assert refused["error"] == "UnsupportedHermes" and "Hermes Agent 0.20.3" in refused["message"]
    without_hermes, _ = run_child(code, tmp_path)
    assert without_hermes["error"] == "ImportError"


METHOD_AND_KEYWORD = """
import json, sys
{before}
import hermes_state
db = hermes_state.SessionDB(sys.argv[1])
report = {{"hasattr": hasattr(db, "get_session_prompt")}}
report["default"] = getattr(db, "get_session_prompt", "none")
try:
    db.get_session_prompt("s")
except AttributeError as exc:
    report["method"] = [type(exc).__name__, str(exc), isinstance(exc, hermes_state.StoreError)]
try:
    db.create_session(session_id="s", source="cli", profile_name="work")
except TypeError as exc:
    report["keyword"] = [type(exc).__name__, str(exc)]
try:
    db.append_message("s", "user", "hi", extra_field=1)
except TypeError as exc:
    report["append"] = [type(exc).__name__, str(exc)]
db.close()
print(json.dumps(report))
"""


def test_a_missing_method_says_so_and_probing_still_works(tmp_path: Path) -> None:
    code = METHOD_AND_KEYWORD.replace("hermes_state.StoreError", "__import__('hermes_store').StoreError")
    report, _ = run_child(code.format(before=""), tmp_path)
    assert report["hasattr"] is False and report["default"] == "none"
    kind, message, is_store_error = report["method"]
    assert kind == "DropInLacksMethod" and is_store_error
    assert "\n" not in message and "get_session_prompt" in message and ">=0.18.0,<0.18.1" in message


def test_a_missing_keyword_says_so_when_an_unserved_hermes_runs(tmp_path: Path) -> None:
    tree = fake_hermes_tree(tmp_path, "0.20.3")
    code = METHOD_AND_KEYWORD.replace("hermes_state.StoreError", "__import__('hermes_store').StoreError")
    report, _ = run_child(
        code.format(before="import hermes_cli"), tmp_path, tree, **{ALLOW_UNSUPPORTED_HERMES_ENV: "1"}
    )
    kind, message = report["keyword"]
    assert kind == "DropInLacksKeyword"
    assert "\n" not in message and "create_session" in message and "profile_name" in message
    assert ">=0.18.0,<0.18.1" in message and "0.20.3" in message
    assert report["append"][0] == "DropInLacksKeyword" and "extra_field" in report["append"][1]


def test_a_type_error_raised_inside_a_method_is_not_translated(tmp_path: Path) -> None:
    tree = fake_hermes_tree(tmp_path, "0.20.3")
    code = textwrap.dedent(
        """
        import json, sys, hermes_cli, hermes_state
        db = hermes_state.SessionDB(sys.argv[1])
        db.create_session(session_id="s", source="cli")
        try:
            db.append_message("s", "assistant", "x", tool_calls=[object()])  # not JSON
        except TypeError as exc:
            print(json.dumps({"error": type(exc).__name__}))
        else:
            print(json.dumps({}))
        """
    )
    report, _ = run_child(code, tmp_path, tree, **{ALLOW_UNSUPPORTED_HERMES_ENV: "1"})
    assert report == {"error": "TypeError"}
