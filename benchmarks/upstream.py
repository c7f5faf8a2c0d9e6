"""Upstream Hermes' own ``SessionDB``, loaded at run time from the local mirror.

The benchmarks compare hermes_store with the real thing, not a re-implementation:
``hermes_state.py`` at the pinned commit is extracted with ``git show`` into a temporary
folder (never into this repository) and imported from there under its own module name.
Its two imports from the rest of Hermes get minimal stand-ins written here
(``hermes_constants.get_hermes_home`` and ``agent.memory_manager.sanitize_context``, which
only replay uses). Without the mirror, :func:`upstream_folder` returns ``None`` and the
benchmarks skip the upstream column with a message.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

MIRROR = Path("/work/.mirror/0xK8oX+hermes-agent/repo")
COMMIT = "c5b4c481656634ff919b214a037b830077d3bbd1"
"""Upstream at schema 11, the version the first drop-in followed."""
HEAD_COMMIT = "7e8f50a14176e02b514631b0b04470acaadae32a"
"""Upstream at schema 17: the commit the drop-in follows now. The one place that names it:
the upstream test harness (tests/sessiondb/test_upstream_suite.py) and
scripts/upstream-client-tests read it from here (docs/upstream.md: moving to a newer one)."""

STORE_TEST_FILES = (
    "tests/test_hermes_state.py",
    "tests/hermes_state/test_resolve_resume_session_id.py",
    "tests/hermes_state/test_get_messages_around.py",
    "tests/hermes_state/test_get_anchored_view.py",
    "tests/hermes_state/test_session_archiving.py",
    "tests/test_hermes_state_compression_locks.py",
    "tests/test_hermes_state_wal_fallback.py",
    "tests/test_state_db_malformed_repair.py",
)
"""Upstream's test files whose subject is ``hermes_state`` itself; the drop-in must pass them."""

TEST_IMPORTS = ("agent/tool_dispatch_helpers.py", "agent/tool_result_classification.py")
"""Upstream modules a store test imports to build its input, extracted beside the stand-ins
(both import only the standard library and each other)."""
MODULE_NAME = "upstream_hermes_state"

RELEASE_MIRROR = Path("/work/.mirror/allr-ajmx+allr-agent/repo")
"""A mirror of upstream's history that reaches release 0.20.3 (its branch
``refs/heads/stream/downstream`` is upstream unmodified)."""
RELEASE_COMMIT = "7999ac6e3d59f63e7b60b3297b9a4f24b234f43a"
"""Upstream release 0.20.3, at schema 26: a newer Hermes than the drop-in serves, whose files
the store must read right and never damage."""
RELEASE_FILES = (
    "hermes_state.py",
    "hermes_state_common.py",
    "hermes_state_schema.py",
    "hermes_state_search.py",
    "hermes_state_portability.py",
    "agent/session_activity.py",
    "agent/message_sanitization.py",
    "agent/skill_commands.py",
    "agent/prompt_cache_boundary.py",
    "agent/skill_preprocessing.py",
    "hermes_cli/sqlite_runtime.py",
    "hermes_cli/sqlite_safe_read.py",
    "hermes_cli/_subprocess_compat.py",
    "hermes_constants.py",
)
"""Release 0.20.3's five store modules and the standard-library-only modules they import."""

_STANDINS = {
    "hermes_constants.py": (
        "import os\nfrom pathlib import Path\n\n\n"
        "def get_hermes_home():\n"
        "    return Path(os.environ.get('HERMES_HOME') or Path.home() / '.hermes')\n"
    ),
    "agent/__init__.py": "",
    "agent/memory_manager.py": "def sanitize_context(text):\n    return text\n",
}


def upstream_file(path: str, commit: str = COMMIT, *, mirror: Path | None = None) -> str | None:
    """The text of ``path`` in upstream Hermes at ``commit``, read from ``mirror`` (default
    :data:`MIRROR`), or ``None`` (with the reason on stderr) when the mirror cannot provide it."""
    mirror = mirror or MIRROR
    if not mirror.exists():
        print(f"upstream skipped: no Hermes mirror at {mirror}", file=sys.stderr)
        return None
    shown = subprocess.run(
        ["git", "-C", str(mirror), "show", f"{commit}:{path}"], capture_output=True, text=True
    )
    if shown.returncode != 0:
        print(
            f"upstream skipped: git show {commit[:8]}:{path} failed: {shown.stderr.strip()}", file=sys.stderr
        )
        return None
    return shown.stdout


def release_folder() -> Path | None:
    """A temporary folder holding upstream release 0.20.3's store (:data:`RELEASE_FILES`, with
    ``agent.memory_manager`` stubbed), to be imported as ``hermes_state`` by a process that
    puts the folder first on ``sys.path``; ``None`` (reason on stderr) without the mirror."""
    texts: dict[str, str] = {}
    for path in RELEASE_FILES:
        text = upstream_file(path, RELEASE_COMMIT, mirror=RELEASE_MIRROR)
        if text is None:
            return None
        texts[path] = text
    texts |= {
        "agent/__init__.py": "",
        "hermes_cli/__init__.py": "",
        "agent/memory_manager.py": _STANDINS["agent/memory_manager.py"],
    }
    folder = Path(tempfile.mkdtemp(prefix="hermes-release-"))
    for name, text in texts.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def upstream_folder(commit: str = COMMIT) -> Path | None:
    """A temporary folder holding upstream's ``hermes_state.py`` at ``commit`` and its
    stand-ins, or ``None`` (with the reason on stderr) when the mirror cannot provide it."""
    source = upstream_file("hermes_state.py", commit)
    if source is None:
        return None
    folder = Path(tempfile.mkdtemp(prefix="hermes-upstream-"))
    (folder / f"{MODULE_NAME}.py").write_text(source, encoding="utf-8")
    for name, text in _STANDINS.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def store_test_folder(commit: str = HEAD_COMMIT) -> Path | None:
    """A temporary folder holding upstream's :data:`STORE_TEST_FILES` at ``commit`` (same
    relative paths), the stand-ins and :data:`TEST_IMPORTS` at its root (put it on
    ``PYTHONPATH``) and an empty ``pytest.ini``; ``None`` (with the reason on stderr) when the
    mirror cannot provide them. ``hermes_state`` itself is not there: the tests import the
    installed drop-in."""
    # tests/__init__.py too: without it, tests/hermes_state/ would be found as the
    # namespace package ``hermes_state`` instead of the drop-in.
    wanted = ("tests/__init__.py", *STORE_TEST_FILES, *TEST_IMPORTS)
    texts: dict[str, str] = {}
    for path in wanted:
        text = upstream_file(path, commit)
        if text is None:
            return None  # the reason is on stderr, once
        texts[path] = text
    folder = Path(tempfile.mkdtemp(prefix="hermes-upstream-tests-"))
    for name, text in {**_STANDINS, **texts, "pytest.ini": "[pytest]\n"}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def upstream_session_db(folder: Path, module_name: str = MODULE_NAME) -> Any:
    """Upstream's ``SessionDB`` class, imported from ``folder`` (see :func:`upstream_folder`)
    as module ``module_name`` (one name per upstream commit a process loads)."""
    module = sys.modules.get(module_name)
    if module is None:
        if str(folder) not in sys.path:
            sys.path.append(str(folder))  # after ours: only its stand-in imports come from here
        spec = importlib.util.spec_from_file_location(module_name, folder / f"{MODULE_NAME}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return module.SessionDB
