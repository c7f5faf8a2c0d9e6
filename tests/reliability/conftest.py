"""Fixtures of the reliability suite: fault injection and the figures it reports.

* ``reliability_figures`` — a dict the tests fill with what they measured; it is printed
  at the end of the run ("reliability figures") and, when ``HERMES_RELIABILITY_FIGURES``
  names a file, written there as JSON (``docs/reliability.md`` quotes these figures).
* ``immutable`` — ``chattr +i`` on a file or directory, undone afterwards: a read-only
  file or directory that binds even for root, who ignores permission bits.
* ``small_fs`` — a size-limited tmpfs mounted for the test (a full disk in miniature),
  with ``remount(read_only=...)`` for a read-only file system.

Fault injection needs root in a sandbox that allows ``mount``/``chattr``; where it is not
available the affected tests skip and say why (the page-limit full-disk test does not
need either).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _faults import SmallFs, run  # noqa: E402

_FIGURES: dict[str, Any] = {}


@pytest.fixture(scope="session")
def reliability_figures() -> dict[str, Any]:
    """What the reliability tests measured, keyed by scenario."""
    return _FIGURES


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _FIGURES:
        return
    terminalreporter.section("reliability figures")
    for name, figures in _FIGURES.items():
        terminalreporter.write_line(f"{name}: {json.dumps(figures, sort_keys=True, default=str)}")
    target = os.environ.get("HERMES_RELIABILITY_FIGURES")
    if target:
        Path(target).write_text(json.dumps(_FIGURES, indent=2, sort_keys=True, default=str) + "\n")


@pytest.fixture
def immutable(tmp_path: Path) -> Iterator[Callable[[Path], None]]:
    """``immutable(path)`` makes ``path`` immutable until the test ends (skips if unsupported)."""
    probe = tmp_path / ".chattr-probe"
    probe.touch()
    if os.geteuid() != 0 or run("chattr", "+i", str(probe)).returncode != 0:
        pytest.skip("chattr +i is not available here (needs root on a file system with attributes)")
    run("chattr", "-i", str(probe))
    marked: list[Path] = []

    def make(path: Path) -> None:
        result = run("chattr", "+i", str(path))
        assert result.returncode == 0, result.stderr
        marked.append(path)

    try:
        yield make
    finally:
        for path in reversed(marked):
            run("chattr", "-i", str(path))


# --- small file systems ---------------------------------------------------------------------


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Callable[[str], SmallFs]]:
    """``small_fs("2m")`` mounts a tmpfs of that size (skips where mounting is not allowed)."""
    mounted: list[Path] = []

    def mount(size: str) -> SmallFs:
        target = tmp_path / f"fs{len(mounted)}"
        target.mkdir()
        result = run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(target))
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip()}); needs CAP_SYS_ADMIN")
        mounted.append(target)
        return SmallFs(target)

    try:
        yield mount
    finally:
        for target in reversed(mounted):
            run("mount", "-o", "remount,rw", str(target))
            if run("umount", str(target)).returncode != 0:
                run("umount", "-l", str(target))
